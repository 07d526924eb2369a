// What build this binary is: the project version (CMakeLists.txt's project()) and the git commit
// it was built from ("+changes" when tracked files differed from it; "unknown" outside a git
// checkout). `serve --version` prints them, and the benchmark programs write them into their
// result files (programs/bench_result). Generated at build time by cmake/build_info.cmake into the
// ds_build_info library.
#pragma once

namespace ds {

const char* build_version();
const char* build_commit();

}  // namespace ds
