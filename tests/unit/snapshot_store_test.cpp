// SnapshotStore::published, which /-/ready is built on: once a collector has published, a later
// remove() (a reload rebuilding it) does not make it unpublished.

#include "core/snapshot_store.h"

#include <gtest/gtest.h>

namespace ibfabric {
namespace {

TEST(SnapshotStore, PublishedOnceStaysPublished) {
  SnapshotStore store;
  EXPECT_FALSE(store.published("sysfs"));
  store.publish("sysfs", std::make_shared<Snapshot>());
  EXPECT_TRUE(store.published("sysfs"));
  EXPECT_FALSE(store.published("ports"));
  store.remove("sysfs");
  EXPECT_TRUE(store.all().empty());
  EXPECT_TRUE(store.published("sysfs"));
}

}  // namespace
}  // namespace ibfabric
