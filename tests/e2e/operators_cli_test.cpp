// `kloop operators`: every registered operator with its contract id and hash, as text and JSON; an
// unknown operator on another command lists what is registered.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/registry.h"
#include "tests/support/run_command.h"

namespace kloop {
namespace {

using Proc = test_support::CommandResult;

// `kloop ARGS`, stdout and stderr together.
Proc kloop_run(const std::string& args) {
  return test_support::run_command(test_support::binary_path("kloop") + " " + args + " 2>&1");
}

TEST(OperatorsCliTest, JsonListsEveryRegisteredOperatorWithItsContractHash) {
  const Proc p = kloop_run("operators --json");
  ASSERT_EQ(p.rc, 0) << p.out;
  const auto j = nlohmann::json::parse(p.out);
  ASSERT_EQ(j.size(), op::operators().size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    const op::Operator& o = *op::operators()[i];
    EXPECT_EQ(j[i]["name"], o.cli_name());
    EXPECT_EQ(j[i]["contract_id"], o.contract_id());
    EXPECT_EQ(j[i]["contract_sha256"], o.contract_sha256());
  }
  const Proc text = kloop_run("operators");
  ASSERT_EQ(text.rc, 0) << text.out;
  for (const op::Operator* o : op::operators())
    EXPECT_NE(text.out.find(o->contract_sha256()), std::string::npos) << text.out;
}

TEST(OperatorsCliTest, AnUnknownOperatorIsAUsageErrorListingTheRegisteredOnes) {
  for (const char* cmd : {"optimize nosuchop --budget 1", "evaluate nosuchop --candidate /tmp"}) {
    const Proc p = kloop_run(cmd);
    EXPECT_EQ(p.rc, 2) << cmd << ": " << p.out;
    EXPECT_NE(p.out.find("unknown operator 'nosuchop'"), std::string::npos) << p.out;
    EXPECT_NE(p.out.find(op::operator_names()), std::string::npos) << p.out;
  }
}

} // namespace
} // namespace kloop
