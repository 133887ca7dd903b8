// Test driver: writes a fake multi-iteration session through the Store API, one step per
// iteration, as the refinement loop would. Usage: store_fake_session_driver DIR ITERATIONS
// [--finish]. Prints "session ID" once the session row is committed. The kill test SIGKILLs it
// at random moments; the CLI test uses --finish for a complete, promoted session.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "store/error.h"
#include "tests/store/fixture.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s DIR ITERATIONS [--finish]\n", argv[0]);
    return 2;
  }
  try {
    kloop::store::Store st = kloop::store::Store::open(argv[1]);
    const int n = std::atoi(argv[2]);
    if (argc > 3 && std::string(argv[3]) == "--finish") {
      std::printf("session %lld\n",
                  static_cast<long long>(kloop::store::testing::write_fake_session(st, n)));
      return 0;
    }
    kloop::store::SessionRecord s{.operator_name = "weighted_rmsnorm",
                                  .contract_version = "1",
                                  .provider = "offline",
                                  .model = "builtin-v1",
                                  .budget = n};
    st.create_session(s);
    std::printf("session %lld\n", static_cast<long long>(s.id));
    std::fflush(stdout);
    for (int i = 0; i < n; ++i)
      kloop::store::testing::write_fake_iteration(st, s.id, i, false);
    st.finish_session(s.id, kloop::store::SessionStatus::kCompleted,
                      kloop::store::VerdictCode::kReject);
  } catch (const kloop::store::StoreError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  }
  return 0;
}
