// The private temporary folder of one kloop process. The evaluator makes temporary folders that
// hold a candidate's source, cubin and worker requests (kloop-build-*, kloop-sass-*,
// kloop-gates-*, kloop-gpu-*) and removes them afterwards; a kloop killed with SIGKILL cannot. So
// each process that evaluates candidates points $TMPDIR (its own, and so its workers') at
// $TMPDIR/kloop-work-HOST.PID, removes that folder on exit, and removes at start the ones of
// processes of this host that are gone (their PID is not alive).
#pragma once

#include <string>

namespace kloop::app {

class WorkRoot {
public:
  // Creates $TMPDIR/kloop-work-HOST.PID (mode 0700) after removing stale siblings and sets
  // $TMPDIR to it (call it before any thread starts); throws std::runtime_error naming the folder
  // when it cannot be created.
  WorkRoot();
  ~WorkRoot(); // removes the folder and everything in it, and restores $TMPDIR
  WorkRoot(const WorkRoot&) = delete;
  WorkRoot& operator=(const WorkRoot&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
  std::string previous_tmpdir_;
  bool had_tmpdir_ = false;
};

// Removes the kloop-work-HOST.PID folders under `parent` whose PID is not a live process of this
// host; returns how many. Folders of other hosts (a shared $TMPDIR) and unparsable names stay.
int remove_stale_work_roots(const std::string& parent);

} // namespace kloop::app
