// Reads a JSON document from tests/controller/testdata/ (a NodeList, a
// PodList): the fixtures the inventory tests share.
#ifndef PACER_TESTS_CONTROLLER_JSON_FIXTURE_H_
#define PACER_TESTS_CONTROLLER_JSON_FIXTURE_H_

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace pacer::controller {

inline nlohmann::json Fixture(const std::string& name) {
  std::ifstream in(std::string(PACER_SOURCE_DIR) + "/tests/controller/testdata/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

}  // namespace pacer::controller

#endif  // PACER_TESTS_CONTROLLER_JSON_FIXTURE_H_
