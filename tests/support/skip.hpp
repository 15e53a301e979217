#pragma once
// A test case that cannot check anything on this machine says so, and ctest reports it as
// skipped (the SKIP_REGULAR_EXPRESSION of the Catch2 tests in CMakeLists.txt matches the line),
// as a script's exit 77 would be; Catch2 2 has no skip of its own. Use it before the case's first
// check and return right after (the macro does): the line makes the whole case a skip, so a
// failed check earlier in the same case would be hidden.
#include <iostream>

#define HW_SKIP_TEST(why)                                            \
  do {                                                               \
    std::cout << "HEADWISE_TEST_SKIPPED: " << why << std::endl;      \
    return;                                                          \
  } while (0)
