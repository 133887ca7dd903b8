// The host-side judgements of the device audit of a correctness call (seed, "Multi-scale numerical
// verification": guard bytes around every buffer, outputs poisoned before each call, repeated and
// concurrent calls). The GPU worker's adapter (evaluator/gpu_worker/device_candidate.cpp) copies
// the bytes back from the device and calls these pure functions; the CPU emulation of that adapter
// in the tests (tests/agent/cpu_device.h) calls the same ones, so a finding reads the same
// whichever machine produced it. Each returns "" when the bytes are clean, else the finding's
// one-line text (it becomes a CandidateCall::audit_failures entry, reported as "audit: <text>").
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace kloop::evaluator::audit {

inline constexpr unsigned char kGuardByte = 0xA5;    // the guard regions' fill
inline constexpr unsigned char kPoisonNan = 0xFF;    // NaN in float32, float16 and bfloat16
inline constexpr unsigned char kPoisonFinite = 0x7B; // a large finite value in every dtype

// The guard region just before (`before` true) or just after a buffer named `name` ("x",
// "weight", "y", ...): the first byte that no longer holds kGuardByte, as "guard bytes before y
// were overwritten (offset -3, byte 253 of the guard): an out-of-bounds write".
std::string guard_damage(std::span<const unsigned char> guard, bool before, std::string_view name);

// An input's storage after the call compared with before it ("x's device storage changed during
// the call: inputs must stay byte-identical").
std::string input_changed(std::span<const std::byte> before, std::span<const std::byte> after,
                          std::string_view name);

// The output of call `call_number` (2, 3, ...) made with kPoisonFinite against the first call's,
// made with kPoisonNan, element by element (`element_bytes` each): elements still holding both
// poisons were never written; other differences are nondeterminism. `poisoned` false (a buffer
// restored, not poisoned, before each call: an input-output tensor): every difference is
// nondeterminism.
std::string repeat_mismatch(std::span<const std::byte> first, std::span<const std::byte> again,
                            std::size_t element_bytes, int call_number, bool poisoned = true);

} // namespace kloop::evaluator::audit
