// family_emit OUT NAME [OPERATOR]: writes the offline family's candidate NAME (a canonical variant
// name of kernels/rmsnorm/family.h, or of kernels/softmax/family.h with OPERATOR softmax) as
// OUT/kernel.cu and OUT/manifest.json, so the build can compile it with nvcc like the defect
// corpus (tests/gpu/CMakeLists.txt) and gpu_family_test / gpu_softmax_test can run it on a device.
// Exit 2 with a message on an unknown name or operator, or a write error.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "kernels/rmsnorm/family.h"
#include "kernels/softmax/family.h"

namespace {

bool write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

// The operator's family member `name`: its two files, or nullopt for an unknown name.
std::optional<std::pair<std::string, std::string>> emit(const std::string& op,
                                                        const std::string& name) {
  if (op == "rmsnorm") {
    const auto v = kloop::rmsnorm::variant_by_name(name);
    if (!v) return std::nullopt;
    const auto gen = kloop::rmsnorm::generate(*v);
    return std::pair{gen.kernel_cu, gen.manifest_json};
  }
  const auto v = kloop::softmax::variant_by_name(name);
  if (!v) return std::nullopt;
  const auto gen = kloop::softmax::generate(*v);
  return std::pair{gen.kernel_cu, gen.manifest_json};
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: family_emit OUT_DIR VARIANT_NAME [rmsnorm|softmax]\n";
    return 2;
  }
  const std::string op = argc == 4 ? argv[3] : "rmsnorm";
  if (op != "rmsnorm" && op != "softmax") {
    std::cerr << "family_emit: operator '" << op << "' has no offline family (rmsnorm, softmax)\n";
    return 2;
  }
  const auto files = emit(op, argv[2]);
  if (!files) {
    std::cerr << "family_emit: '" << argv[2] << "' is not a valid " << op
              << " offline-family variant name (the canonical form and each option's "
                 "constraints: kernels/"
              << op << "/family.h)\n";
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec || !write(out / "kernel.cu", files->first) ||
      !write(out / "manifest.json", files->second)) {
    std::cerr << "family_emit: cannot write into " << out << "\n";
    return 2;
  }
  return 0;
}
