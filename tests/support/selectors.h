// Label and field selectors as list and watch requests carry them
// (?labelSelector=app=x,tier!=web,env in (a,b),!canary and
// ?fieldSelector=metadata.name=j,status.phase!=Failed).
//
// Label selectors: k=v, k==v, k!=v, k (exists), !k (absent), k in (a,b),
// k notin (a,b), comma-separated (all must hold). Field selectors: any dotted
// path into the object with = / == / !=; a missing field compares as "".
//
// Thread-safety: parsed selectors are immutable values.
#ifndef PACER_TESTS_SUPPORT_SELECTORS_H_
#define PACER_TESTS_SUPPORT_SELECTORS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api_error.h"

namespace pacer::testing {

class Selector {
 public:
  Selector() = default;  // matches everything

  // 400 BadRequest for a malformed selector.
  static ApiResult<Selector> ParseLabels(const std::string& text);
  static ApiResult<Selector> ParseFields(const std::string& text);

  bool Matches(const nlohmann::json& object) const;
  bool empty() const { return requirements_.empty(); }

 private:
  enum class Op { kEquals, kNotEquals, kExists, kNotExists, kIn, kNotIn };
  struct Requirement {
    std::string key;
    Op op = Op::kEquals;
    std::vector<std::string> values;
  };

  bool fields_ = false;  // keys are dotted object paths, not label keys
  std::vector<Requirement> requirements_;
};

// The string at a dotted path (".status.phase" or "status.phase"); numbers
// and booleans are rendered as JSON; "" when absent.
std::string FieldAsString(const nlohmann::json& object, const std::string& dotted_path);
// The JSON value at a dotted path, or null.
const nlohmann::json* FieldAt(const nlohmann::json& object, const std::string& dotted_path);

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_SELECTORS_H_
