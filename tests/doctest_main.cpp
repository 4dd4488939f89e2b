// doctest's main(); compiled once (OBJECT library) and linked into every test.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
