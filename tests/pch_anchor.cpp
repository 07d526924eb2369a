// The source of ds_test_pch, the target that owns the tests' precompiled header
// (tests/CMakeLists.txt); it compiles nothing of its own.
