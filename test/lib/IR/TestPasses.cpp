//===- TestPasses.cpp - the registry of test-only passes ------------------===//
#include "TestPasses.h"

void mlir::flash::test::registerTestPasses() {
  registerTestRoundTripPass();
  registerTestRaiseCensusPass();
  registerTestTileWalkPass();
}
