// GoogleTest parameter names for tests parameterised by offline-family variant names
// (kernels/rmsnorm/family.h): the canonical name with '-' replaced by '_' (GoogleTest allows only
// alphanumerics and '_'), e.g. v16_tauto_b256_c4_shfl_pers_peel_pf.
#pragma once

#include <string>

#include <gtest/gtest.h>

namespace kloop::test_support {

inline std::string variant_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

} // namespace kloop::test_support
