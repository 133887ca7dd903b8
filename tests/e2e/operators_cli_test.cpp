// `kloop operators`: every registered operator with its contract id and hash, as text and JSON; an
// unknown operator on another command lists what is registered.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/registry.h"

namespace kloop {
namespace {

struct Proc {
  int rc = -1;
  std::string out;
};

Proc kloop_run(const std::string& args) {
  Proc r;
  const std::string cmd = std::string(KLOOP_BINARY_DIR) + "/bin/kloop " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
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
