// Values the operators refactor (issue 25) must not change, recorded from the code at commit
// 7b3a281 before any code moved: the weighted_rmsnorm/1 contract hash and kernel signature, the
// public, large, CASES.md and invalid suite hashes for seed 1 (the correctness evidence's
// suite_sha256 formula), the materialized input bytes of the smaller public cases, the holdout
// suite and commitment for fixed seeds, the rendered contract prompt, the mutation selection of the
// in-tree baseline (ids and mutated sources) and the checker-coverage search pool. A change here
// changes what a stored session, a receipt or the checked-in coverage record means: it needs its
// own issue, never a re-recorded literal in a refactor.
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "evaluator/static_inspection.h"
#include "holdout/holdout.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/cases.h"
#include "kernels/rmsnorm/contract.h"
#include "kernels/rmsnorm/operator.h"
#include "mutation/operators.h"
#include "mutation/search_pool.h"
#include "prompts/prompt_builder.h"
#include "store/hash.h"

namespace kloop {
namespace {

std::string specs_text(const std::vector<rmsnorm::CaseSpec>& specs) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& s : specs)
    arr.push_back(s.to_json());
  return arr.dump();
}

// The correctness evidence's suite_sha256 (evaluator/device_gates.cpp): specs + contract hash.
std::string suite_sha256(const std::vector<rmsnorm::CaseSpec>& specs,
                         const std::string& contract_sha256 = rmsnorm::contract_sha256()) {
  return store::sha256_hex(specs_text(specs) + "\n" + contract_sha256);
}

// The contract hash at 7b3a281, where these pins were recorded. Issue 21 (merged from main at
// 934d936) then added the tolerance's accepted and rejected differences and ULP bounds to the
// contract document and the prompt's accuracy paragraph: the contract hash, the suite hashes
// (which include it) and the rendered contract prompt were re-recorded from main's own code at
// 934d936 (its libraries, before any of this branch's code), and the suite specs are still
// checked against the 7b3a281 hashes through this constant.
constexpr const char* kContractSha256At7b3a281 =
    "80a1dbc5f979971ab197be52c86557ffe892ceadf0ec166302ecc2cb14a2df97";

std::string read_source(const std::string& relative) {
  std::ifstream in(std::string(KLOOP_SOURCE_DIR) + "/" + relative, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(PinnedValuesTest, ContractHashAndKernelSignatureAreUnchanged) {
  EXPECT_EQ(rmsnorm::contract_sha256(),
            "6da03d9a26a7c939cd2cd8f70b10062ff3ba91830ae8ca081e5e7eae6f401b8c"); // main 934d936
  EXPECT_EQ(rmsnorm::contract_id(), "weighted_rmsnorm/1");
  EXPECT_EQ(rmsnorm::contract_json()["kernel_signature"].get<std::string>(),
            "extern \"C\" __global__ void ENTRY(const T* x, const T* weight, T* y, long long rows, "
            "int H, long long x_row_stride, long long y_row_stride, float eps)");
}

TEST(PinnedValuesTest, SuiteHashesForSeedOneAreUnchanged) {
  const auto pub = rmsnorm::public_cases(1);
  EXPECT_EQ(pub.size(), 243u);
  // The specs themselves, against the hashes recorded at 7b3a281.
  const std::string old_contract = kContractSha256At7b3a281;
  EXPECT_EQ(suite_sha256(pub, old_contract),
            "aafb0dcb83519f508b503e88a3cb8801cf8e5e2559ede54e94de67e7f75c6bcf");
  EXPECT_EQ(suite_sha256(rmsnorm::large_cases(1), old_contract),
            "0bdaa2dbe89cb0f90e2214fb12aed0960dff2c4454dde882dd83c8c05c1b1bab");
  EXPECT_EQ(suite_sha256(rmsnorm::cases_md_cases(), old_contract),
            "7f895457ee911c43c5d302769feb03e35da7a842b713f9c78fbbe0d54acf8f1e");
  EXPECT_EQ(suite_sha256(rmsnorm::invalid_cases(1), old_contract),
            "de0c119d1e3e1879ddd6e52a51e3b0766fdf76217cb74ee82d7dfa9441e06cec");
  EXPECT_EQ(suite_sha256(rmsnorm::public_cases(7), old_contract),
            "08f6732b7d874004e3e4201d80e32940051eff4456f2e537397283c5fddc09a7");
  // The evidence's suite_sha256 with today's contract, as main's code at 934d936 computes it.
  EXPECT_EQ(suite_sha256(pub), "b9f8fa8c04ce451291d3759ec79b99ab09b59a16645a3059df5f24d04b46b40a");
  EXPECT_EQ(suite_sha256(rmsnorm::large_cases(1)),
            "8f29f8c84a32f0d7a96d35c45579f6f9affc5a771fdf5257e292c7166e481f79");
  EXPECT_EQ(suite_sha256(rmsnorm::cases_md_cases()),
            "a46384e6b79553854d862a09105e1cb141364934969f603d93fcff0fb84b92fb");
  EXPECT_EQ(suite_sha256(rmsnorm::invalid_cases(1)),
            "7d1f64e14f3f821df12890a19147028a724bbd85db1f999e9166b69b52bbcafc");
  // The same suites through the operator interface (kernels/operator.h).
  const op::Operator& rms = rmsnorm::operator_instance();
  EXPECT_EQ(rms.contract_sha256(), rmsnorm::contract_sha256());
  for (const char* name : {"public", "large", "cases_md", "invalid"})
    EXPECT_EQ(nlohmann::json(rms.suite(name, 1)).dump(),
              specs_text(name == std::string("public")     ? pub
                         : name == std::string("large")    ? rmsnorm::large_cases(1)
                         : name == std::string("cases_md") ? rmsnorm::cases_md_cases()
                                                           : rmsnorm::invalid_cases(1)))
        << name;
  // Another seed gives other case seeds, same names.
  EXPECT_EQ(suite_sha256(rmsnorm::public_cases(7)),
            "3c00cf8f028a96bb2ab3819d6bd00ea14de9d193b3750d63c8c7f9c19cb1fd0d");
}

// The bytes each case materializes (storage of x and weight, including the NaN-filled gaps and
// offsets, and the eps argument), for every public case of at most 2^18 elements (the larger ones
// are built by the same code and would only slow the test).
TEST(PinnedValuesTest, MaterializedInputsOfSmallPublicCasesAreUnchanged) {
  std::string all;
  int hashed = 0;
  for (const auto& spec : rmsnorm::public_cases(1)) {
    if (spec.numel() > (1 << 18)) continue;
    // Through the operator interface: (x, weight) and (eps), as every layer materializes them.
    const op::CallArgs in = rmsnorm::operator_instance().materialize(spec.to_json());
    const HostTensor& x = in.tensors.at(0);
    all += spec.name + ":" + store::sha256_hex(x.storage_bytes()) + "," +
           store::sha256_hex(in.tensors.at(1).storage_bytes()) + "," +
           in.scalars.at(0).to_json().dump() + ";" + nlohmann::json(x.meta().shape).dump() +
           nlohmann::json(x.strides()).dump() + std::to_string(x.offset()) + "\n";
    ++hashed;
  }
  EXPECT_EQ(hashed, 234);
  EXPECT_EQ(store::sha256_hex(all),
            "17eb39b295346836da32db7447f93be412171d7bf2079902f582c8f8d1b323c5");
}

TEST(PinnedValuesTest, HoldoutSuitesAndCommitmentsForFixedSeedsAreUnchanged) {
  const op::Operator& rms = rmsnorm::operator_instance();
  EXPECT_EQ(rms.holdout_version(), "weighted_rmsnorm-holdout/1");
  const struct {
    std::uint64_t seed;
    const char* suite_sha256;
    const char* commitment;
  } pins[] = {{1, "f89c2b2a53dcb7da705552b012e7562a21701bb21fcc3d5f6dba959e0c9d2a64",
               "e3adbe058d6ce8437a2f649869fb86345ea80cd8113d6a25bd4b95b558c78d6a"},
              {42, "1f1b913c1dd7cbc15c867f959909fe6a2d689102d0833f0f03ddb28b06110739",
               "03400e770ce8eb7f853900d9c2c311031cab18c900f838b2d8b04ca6746b2d4f"}};
  for (const auto& pin : pins) {
    const auto suite = holdout::generate_suite(rms, pin.seed);
    EXPECT_EQ(suite.size(), 48u);
    EXPECT_EQ(store::sha256_hex(holdout::canonical_suite_text(suite)), pin.suite_sha256)
        << pin.seed;
    EXPECT_EQ(holdout::commitment_for(rms, suite, pin.seed), pin.commitment) << pin.seed;
  }
}

TEST(PinnedValuesTest, RenderedPromptsAreUnchanged) {
  const prompts::PromptBuilder b(rmsnorm::contract_json());
  // Re-recorded from main at 934d936 (issue 21's accuracy paragraph and contract tolerance text);
  // 4d047090c191d353996457f947d0b05efecbebf8280fe58ca9abda92ce2f286a at 7b3a281.
  EXPECT_EQ(store::sha256_hex(b.contract_prompt()),
            "1f5cc6016dc1a4735ba3172e37360a84fc34bd414bd4d3c0bec4308eaea1b50c");
  EXPECT_EQ(store::sha256_hex(b.system_prompt()),
            "5a8f01cf3f16cce1021ab186a0a084a923a91f81ccd0f5f4ea081ffc51585d03");
}

// The checked-in coverage record (tests/gpu/checker_coverage_record.json) names its mutants by id;
// this pins what each id edits as well, and weighted_rmsnorm/1's mutation vocabulary, so a renamed
// or rewritten operator cannot hide a lost kill behind a re-recorded record (other operators'
// rules come after it in the table and have no site in its baseline: tests/mutation).
TEST(PinnedValuesTest, MutationVocabularyAndBaselineMutantsAreUnchanged) {
  std::string names;
  for (const std::string& o : mutation::vocabulary("weighted_rmsnorm/1"))
    names += o + ",";
  EXPECT_EQ(names, "barrier-remove,barrier-move,relational-flip,row-overrun,bound-plus-one,"
                   "bound-minus-one,tail-padding,stride-as-width,stride-as-width-all,"
                   "narrow-offset-32,eps-drop,eps-hardcode,divide-rounded-width,skip-weight-fp32,"
                   "half-accumulation,scrub-nonfinite,clamp-nonfinite,module-scope-state,"
                   "hardcode-width,");
  const std::string source = read_source("kernels/rmsnorm/baseline/kernel.cu");
  ASSERT_FALSE(source.empty());
  EXPECT_EQ(store::sha256_hex(source),
            "fad5ae0b69723caae70ccd51fa71a3309cb65b7a6b42c617c1ce93d599a4d20c");
  std::string mutants;
  for (const auto& m : mutation::select_mutants(source, {}, 2, 0))
    mutants += m.id + ":" + store::sha256_hex(m.source) + "\n";
  EXPECT_EQ(store::sha256_hex(mutants),
            "c903a5c69d5e28e311684e6ab7e0ab074425cab9a724c961c7d1d6f83afe4192");
  EXPECT_EQ(store::sha256_hex(
                nlohmann::json(mutation::search_pool(rmsnorm::operator_instance(), 1)).dump()),
            "d38ca52432468c9b9c3898458a40d98dd3fc2fa87f9993f72af86bf333345987");
}

// The eight-parameter ABI as the static gate reads it from PTX: (const T* x, const T* weight, T* y,
// long long rows, int H, long long x_row_stride, long long y_row_stride, float eps), in this
// order. The exact list passes; any parameter of another size class in any position (two swapped
// parameters, int where long long belongs, a double eps) is a signature finding, and so is a
// ninth or a missing parameter.
TEST(PinnedValuesTest, StaticGateTakesExactlyTheEightParameterAbi) {
  op::Manifest m;
  m.variants.emplace_back().entry_points = {{DType::kFloat32, "rms_f32"}};
  auto ptx_of = [](const std::vector<std::string>& types) {
    std::string p = ".version 9.0\n.target sm_90\n.address_size 64\n\n.visible .entry rms_f32(\n";
    for (std::size_t i = 0; i < types.size(); ++i)
      p += "\t.param " + types[i] + " rms_f32_param_" + std::to_string(i) +
           (i + 1 < types.size() ? ",\n" : "\n");
    return p + ")\n{\n\tret;\n}\n";
  };
  auto signature_findings = [&](const std::vector<std::string>& types) {
    int n = 0;
    for (const auto& f : evaluator::check_ptx(ptx_of(types), rmsnorm::declaration(), m))
      n += f.kind == "signature";
    return n;
  };
  const std::vector<std::string> abi = {".u64", ".u64", ".u64", ".u64",
                                        ".u32", ".u64", ".u64", ".f32"};
  EXPECT_EQ(signature_findings(abi), 0);
  // Signed and untyped spellings of the same classes are the same ABI.
  EXPECT_EQ(signature_findings({".b64", ".b64", ".b64", ".s64", ".s32", ".s64", ".b64", ".b32"}),
            0);
  for (std::size_t i = 0; i < abi.size(); ++i) {
    std::vector<std::string> wrong = abi;
    wrong[i] = abi[i] == ".u32" || abi[i] == ".f32" ? ".u64" : ".u32";
    EXPECT_EQ(signature_findings(wrong), 1) << "parameter " << i;
  }
  std::vector<std::string> swapped = abi; // (..., long long rows, long long xs, int H, ...)
  std::swap(swapped[4], swapped[5]);
  EXPECT_EQ(signature_findings(swapped), 1);
  std::vector<std::string> nine = abi;
  nine.push_back(".u64");
  EXPECT_EQ(signature_findings(nine), 1);
  EXPECT_EQ(signature_findings({abi.begin(), abi.end() - 1}), 1);
  std::vector<std::string> f64_eps = abi;
  f64_eps[7] = ".f64";
  EXPECT_EQ(signature_findings(f64_eps), 1);
}

} // namespace
} // namespace kloop
