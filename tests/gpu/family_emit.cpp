// family_emit OUT NAME: writes the offline family's candidate NAME (a canonical variant name,
// kernels/rmsnorm/family.h) as OUT/kernel.cu and OUT/manifest.json, so the build can compile it
// with nvcc like the defect corpus (tests/gpu/CMakeLists.txt) and gpu_family_test can run it on a
// device. Exit 2 with a message on an unknown name or a write error.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "kernels/rmsnorm/family.h"

namespace {

bool write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: family_emit OUT_DIR VARIANT_NAME\n";
    return 2;
  }
  const auto variant = kloop::rmsnorm::variant_by_name(argv[2]);
  if (!variant) {
    std::cerr << "family_emit: '" << argv[2]
              << "' is not a valid offline-family variant name (the canonical form and each "
                 "option's constraints: kernels/rmsnorm/family.h, docs/OFFLINE.md)\n";
    return 2;
  }
  const auto gen = kloop::rmsnorm::generate(*variant);
  const std::filesystem::path out = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec || !write(out / "kernel.cu", gen.kernel_cu) ||
      !write(out / "manifest.json", gen.manifest_json)) {
    std::cerr << "family_emit: cannot write into " << out << "\n";
    return 2;
  }
  return 0;
}
