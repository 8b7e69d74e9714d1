//===- TestPasses.h - test-only passes that flash-opt alone registers -----===//
#ifndef FLASH_TEST_LIB_TESTPASSES_H
#define FLASH_TEST_LIB_TESTPASSES_H

#include <memory>

namespace mlir {
class Pass;
namespace flash::test {
std::unique_ptr<Pass> createTestRoundTripPass();
/// Every test pass (TestPasses.cpp).
void registerTestPasses();
void registerTestRoundTripPass();
void registerTestRaiseCensusPass();
void registerTestTileWalkPass();
} // namespace flash::test
} // namespace mlir

#endif // FLASH_TEST_LIB_TESTPASSES_H
