// The operator declaration, its canonical ABI, the argument packer and the registry.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

#include "kernels/abi_pack.h"
#include "kernels/registry.h"
#include "kernels/rmsnorm/operator.h"

namespace kloop::op {
namespace {

TEST(RegistryTest, EveryFolderWithAnOperatorCppIsRegistered) {
  std::set<std::string> on_disk;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(KLOOP_SOURCE_DIR) / "kernels"))
    if (e.is_directory() && std::filesystem::exists(e.path() / "operator.cpp"))
      on_disk.insert(e.path().filename().string());
  std::set<std::string> generated(registered_folders().begin(), registered_folders().end());
  EXPECT_EQ(generated, on_disk);
  std::set<std::string> names;
  for (const Operator* o : operators()) {
    names.insert(std::string(o->cli_name()));
    EXPECT_EQ(find_operator(o->cli_name()), o);
    EXPECT_EQ(find_operator(o->name()), o);
    EXPECT_EQ(find_operator(o->contract_id()), o);
    EXPECT_EQ(o->folder(), "kernels/" + std::string(o->cli_name()));
  }
  EXPECT_EQ(names, on_disk) << "each folder registers exactly one operator named after it";
  EXPECT_TRUE(std::is_sorted(operators().begin(), operators().end(),
                             [](auto* a, auto* b) { return a->cli_name() < b->cli_name(); }));
  EXPECT_EQ(find_operator("no_such_operator"), nullptr);
}

TEST(RegistryTest, EveryDeclarationIsWellFormedAndItsSignatureIsTheContracts) {
  for (const Operator* o : operators()) {
    EXPECT_EQ(check_declaration(o->declaration()), std::nullopt) << o->cli_name();
    EXPECT_EQ(o->contract().at("kernel_signature").get<std::string>(),
              kernel_signature(o->declaration()))
        << o->cli_name();
    EXPECT_EQ(o->contract().at("id").get<std::string>(), o->contract_id());
    EXPECT_EQ(o->contract_sha256().size(), 64u);
    for (const BenchShape& s : o->benchmark_shapes())
      EXPECT_EQ(BenchShape::from_json(o->declaration(), s.to_json(o->declaration())), s);
  }
}

TEST(RegistryTest, ListingNamesEachOperatorsContract) {
  const nlohmann::json j = operators_json();
  ASSERT_EQ(j.size(), operators().size());
  for (const auto& row : j) {
    const Operator* o = find_operator(row.at("name").get<std::string>());
    ASSERT_NE(o, nullptr) << row.dump();
    EXPECT_EQ(row["contract_sha256"], o->contract_sha256());
    EXPECT_EQ(row["contract_id"], o->contract_id());
    EXPECT_FALSE(row["benchmark_shapes"].empty());
  }
}

// The RMSNorm ABI derived from its declaration is the contract's eight parameters, in order, with
// their C types and sizes.
TEST(DeclarationTest, RmsNormAbiIsTheEightParametersInOrder) {
  const auto params = abi(rmsnorm::declaration());
  std::vector<std::string> got;
  for (const AbiParam& p : params)
    got.push_back(p.c_type + " " + p.name + ":" + std::to_string(p.bytes));
  EXPECT_EQ(got, (std::vector<std::string>{
                     "const T* x:8", "const T* weight:8", "T* y:8", "long long rows:8", "int H:4",
                     "long long x_row_stride:8", "long long y_row_stride:8", "float eps:4"}));
  EXPECT_EQ(params[4].ptx_types, (std::vector<std::string>{".u32", ".s32", ".b32"}));
  EXPECT_EQ(params[7].ptx_types, (std::vector<std::string>{".f32", ".b32"}));
}

TEST(DeclarationTest, MalformedDeclarationsAreNamed) {
  Declaration d = rmsnorm::declaration();
  EXPECT_EQ(check_declaration(d), std::nullopt);
  auto broken = [&](auto edit) {
    Declaration c = d;
    edit(c);
    const auto why = check_declaration(c);
    return why.value_or("");
  };
  EXPECT_NE(broken([](Declaration& c) { c.tensors[0].dims = {"W"}; }).find("unknown axis 'W'"),
            std::string::npos);
  EXPECT_NE(broken([](Declaration& c) { c.tensors[1].name = "x"; }).find("used twice"),
            std::string::npos);
  EXPECT_NE(broken([](Declaration& c) { c.tensors[2].role = Role::kInput; }).find("writes no"),
            std::string::npos);
  EXPECT_NE(broken([](Declaration& c) { c.tensors[1].role = Role::kOutput; }).find("broadcast"),
            std::string::npos);
  EXPECT_NE(broken([](Declaration& c) { c.axes[0].max = 1ll << 32; }).find("2147483647"),
            std::string::npos);
  EXPECT_NE(broken([](Declaration& c) { c.scalars[0].name = "rows"; }).find("'rows'"),
            std::string::npos);
  EXPECT_NE(broken([](Declaration& c) {
              c.constraints.push_back({"H", 2, "I"});
            }).find("H == 2*I"),
            std::string::npos);
}

TEST(AbiPackTest, PacksEachParameterWithItsTypeInAbiOrder) {
  const auto params = abi(rmsnorm::declaration());
  AbiValues v;
  v.tensors = {0x1000, 0x2000, 0x3000};
  v.rows = 5'000'000'000LL; // past INT32_MAX: rows is long long
  v.axes = {4099};
  v.row_strides = {4100, 0, 4099};
  v.scalars = {1e-5};
  PackedArgs packed(params, v);
  ASSERT_EQ(packed.size(), 8u);
  auto as = [&](std::size_t i, auto zero) {
    EXPECT_EQ(packed.param_bytes(i), sizeof(zero)) << i;
    std::memcpy(&zero, packed.argv()[i], sizeof(zero));
    EXPECT_EQ(static_cast<const void*>(packed.argv()[i]), packed.param_data(i));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(packed.argv()[i]) % 8, 0u) << i;
    return zero;
  };
  EXPECT_EQ(as(0, static_cast<const void*>(nullptr)), reinterpret_cast<const void*>(0x1000));
  EXPECT_EQ(as(1, static_cast<const void*>(nullptr)), reinterpret_cast<const void*>(0x2000));
  EXPECT_EQ(as(2, static_cast<const void*>(nullptr)), reinterpret_cast<const void*>(0x3000));
  EXPECT_EQ(as(3, 0LL), 5'000'000'000LL);
  EXPECT_EQ(as(4, 0), 4099);
  EXPECT_EQ(as(5, 0LL), 4100LL);
  EXPECT_EQ(as(6, 0LL), 4099LL);
  EXPECT_EQ(as(7, 0.0f), 1e-5f);
}

TEST(AbiPackTest, AnAxisPastIntOrAMissingValueIsRefusedByName) {
  const auto params = abi(rmsnorm::declaration());
  AbiValues v{{1, 2, 3}, 1, {1ll << 31}, {1, 0, 1}, {1e-5}};
  try {
    PackedArgs p(params, v);
    FAIL() << "packed an H past INT32_MAX";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'H'"), std::string::npos) << e.what();
  }
  v.axes = {8};
  v.scalars.clear();
  EXPECT_THROW(PackedArgs(params, v), std::invalid_argument);
}

} // namespace
} // namespace kloop::op
