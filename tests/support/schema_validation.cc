#include "schema_validation.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>

namespace pacer::testing {
namespace {

using nlohmann::json;

const json* FieldAtPath(const json& object, std::initializer_list<const char*> keys) {
  const json* at = &object;
  for (const char* key : keys) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

// --- Go's formatting, as kube-apiserver's messages use it -------------------

}  // namespace

// strconv.Quote for the strings in messages: escapes quotes, backslashes
// and control characters; UTF-8 passes through.
std::string GoQuote(const std::string& s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\a':
        out += "\\a";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\v':
        out += "\\v";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {

// fmt's %v of a float64: the shortest digits that round-trip, in %e form
// when the exponent is below -4 or at least 6 ("1e+06", "0.5", "123456").
std::string GoFloat(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
  std::string s(buf, result.ptr);  // "-1.25e+06"
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  const size_t e = s.find('e');
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(s.substr(e + 1));
  if (exp < -4 || exp >= 6) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int abs_exp = exp < 0 ? -exp : exp;
    out += exp < 0 ? "e-" : "e+";
    if (abs_exp < 10) out += "0";
    return out + std::to_string(abs_exp);
  }
  if (exp < 0) return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  const size_t integer_digits = static_cast<size_t>(exp) + 1;
  if (digits.size() <= integer_digits) {
    return sign + digits + std::string(integer_digits - digits.size(), '0');
  }
  return sign + digits.substr(0, integer_digits) + "." + digits.substr(integer_digits);
}

// What a JSON value is once Go's API machinery has decoded it: integers that
// fit int64 stay integers, every other number is a float64.
enum class Kind { kNull, kBool, kInt, kFloat, kString, kArray, kObject };

Kind KindOf(const json& v) {
  switch (v.type()) {
    case json::value_t::boolean:
      return Kind::kBool;
    case json::value_t::number_integer:
      return Kind::kInt;
    case json::value_t::number_unsigned:
      return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                 ? Kind::kInt
                 : Kind::kFloat;
    case json::value_t::number_float:
      return Kind::kFloat;
    case json::value_t::string:
      return Kind::kString;
    case json::value_t::array:
      return Kind::kArray;
    case json::value_t::object:
      return Kind::kObject;
    default:
      return Kind::kNull;
  }
}

int64_t AsInt(const json& v) {
  return v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.get<int64_t>();
}
double AsFloat(const json& v) { return v.get<double>(); }

// The JSON type name kube-openapi infers for a value.
std::string SchemaType(Kind kind) {
  switch (kind) {
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "number";
    case Kind::kString:
      return "string";
    case Kind::kArray:
      return "array";
    case Kind::kObject:
      return "object";
    case Kind::kNull:
      break;
  }
  return "null";
}

// The format kube-openapi infers for a value (schemaInfoForType).
std::string GoFormat(Kind kind) {
  if (kind == Kind::kInt) return "int64";
  if (kind == Kind::kFloat) return "float64";
  return "";
}

// swag.IsFloat64AJSONInteger: integral and within +-2^53.
bool IsJsonInteger(double f) {
  constexpr double kMax = 9007199254740992.0;  // 2^53
  if (std::isnan(f) || std::isinf(f) || f < -kMax || f > kMax) return false;
  return std::trunc(f) == f;
}

// json.Marshal of a number or other value, for "supported values" lists.
std::string GoJson(const json& v) {
  if (v.is_number_float()) {
    const double f = v.get<double>();
    if (IsJsonInteger(f)) return std::to_string(static_cast<int64_t>(f));
    char buf[64];
    auto result = std::to_chars(buf, buf + sizeof(buf), f);
    return std::string(buf, result.ptr);
  }
  return v.dump();
}

// field.Error.ErrorBody()'s rendering of a bad value.
std::string GoValue(const json& v) {
  switch (KindOf(v)) {
    case Kind::kNull:
      return GoQuote("null");
    case Kind::kBool:
      return v.get<bool>() ? "true" : "false";
    case Kind::kInt:
      return std::to_string(AsInt(v));
    case Kind::kFloat:
      return GoFloat(AsFloat(v));
    case Kind::kString:
      return GoQuote(v.get<std::string>());
    case Kind::kArray:
    case Kind::kObject:
      // Go prints %#v of the map or slice here; JSON is close enough to read.
      return v.dump();
  }
  return v.dump();
}

// --- field.Error constructors ----------------------------------------------------

std::string WithDetail(std::string body, const std::string& detail) {
  if (!detail.empty()) body += ": " + detail;
  return body;
}

FieldError Invalid(const std::string& field, const std::string& value, const std::string& detail) {
  return {"FieldValueInvalid", field, WithDetail("Invalid value: " + value, detail)};
}
FieldError TypeInvalid(const std::string& field, const std::string& value,
                       const std::string& detail) {
  return {"FieldValueTypeInvalid", field, WithDetail("Invalid value: " + value, detail)};
}
FieldError Required(const std::string& field, const std::string& detail) {
  return {"FieldValueRequired", field, WithDetail("Required value", detail)};
}
FieldError Forbidden(const std::string& field, const std::string& detail) {
  return {"FieldValueForbidden", field, WithDetail("Forbidden", detail)};
}
FieldError NotSupported(const std::string& field, const std::string& value,
                        const std::vector<std::string>& supported) {
  std::string detail;
  for (const std::string& s : supported) {
    detail += (detail.empty() ? "supported values: " : ", ") + GoQuote(s);
  }
  return {"FieldValueNotSupported", field, WithDetail("Unsupported value: " + value, detail)};
}
FieldError TooLong(const std::string& field, int64_t max) {
  return {"FieldValueTooLong", field,
          "Too long: may not be more than " + std::to_string(max) + " bytes"};
}
FieldError TooMany(const std::string& field, int64_t actual, int64_t max) {
  return {"FieldValueTooMany", field,
          "Too many: " + std::to_string(actual) + ": must have at most " + std::to_string(max) +
              " items"};
}

// --- schema accessors ------------------------------------------------------------

bool Flag(const json& schema, const char* key) {
  auto it = schema.find(key);
  return it != schema.end() && it->is_boolean() && it->get<bool>();
}

const json* Member(const json& schema, const char* key) {
  if (!schema.is_object()) return nullptr;
  auto it = schema.find(key);
  return it == schema.end() ? nullptr : &*it;
}

const json* Properties(const json& schema) {
  const json* p = Member(schema, "properties");
  return p != nullptr && p->is_object() ? p : nullptr;
}

// One call, one check: written as `Properties(s) != nullptr &&
// !Properties(s)->empty()`, GCC 12 at -O3 cannot tell the two calls return
// the same pointer and reports a null dereference (a Release build failed).
bool HasProperties(const json& schema) {
  const json* props = Properties(schema);
  return props != nullptr && !props->empty();
}

const json* Property(const json& schema, const std::string& name) {
  const json* props = Properties(schema);
  if (props == nullptr) return nullptr;
  auto it = props->find(name);
  return it == props->end() ? nullptr : &*it;
}

// additionalProperties: absent (nullopt), a schema (non-null), or a bool
// (null schema).
std::optional<const json*> AdditionalProperties(const json& schema) {
  const json* ap = Member(schema, "additionalProperties");
  if (ap == nullptr) return std::nullopt;
  if (ap->is_object()) return ap;
  return static_cast<const json*>(nullptr);
}

const json* Items(const json& schema) {
  const json* items = Member(schema, "items");
  return items != nullptr && items->is_object() ? items : nullptr;
}

std::vector<std::string> Types(const json& schema) {
  if (Flag(schema, "x-kubernetes-int-or-string")) return {"integer", "string"};
  const json* type = Member(schema, "type");
  if (type != nullptr && type->is_string() && !type->get<std::string>().empty()) {
    return {type->get<std::string>()};
  }
  return {};
}

bool Contains(const std::vector<std::string>& types, const std::string& t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

std::string Join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

std::optional<int64_t> IntMember(const json& schema, const char* key) {
  const json* v = Member(schema, key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->is_number_float() ? static_cast<int64_t>(v->get<double>()) : AsInt(*v);
}

std::optional<double> FloatMember(const json& schema, const char* key) {
  const json* v = Member(schema, key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->get<double>();
}

// The string formats apiextensions keeps (StripUnsupportedFormatsPostProcess
// drops every other one before validating, int32 and int64 included).
bool SupportedFormat(std::string format) {
  format.erase(std::remove(format.begin(), format.end(), '-'), format.end());
  static const std::set<std::string> kSupported = {
      "bsonobjectid", "uri",    "email",    "hostname",   "ipv4",     "ipv6",
      "cidr",         "mac",    "uuid",     "uuid3",      "uuid4",    "uuid5",
      "isbn",         "isbn10", "isbn13",   "creditcard", "ssn",      "hexcolor",
      "rgbcolor",     "byte",   "password", "date",       "duration", "datetime"};
  return kSupported.count(format) != 0;
}

std::string Format(const json& schema) {
  const json* f = Member(schema, "format");
  if (f == nullptr || !f->is_string()) return "";
  std::string format = f->get<std::string>();
  return SupportedFormat(format) ? format : "";
}

// --- string formats ----------------------------------------------------------------

bool Digits(const std::string& s, size_t from, size_t count) {
  if (from + count > s.size()) return false;
  for (size_t i = from; i < from + count; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// time.Parse("2006-01-02", s) == nil.
bool IsDate(const std::string& s) {
  if (s.size() != 10 || !Digits(s, 0, 4) || s[4] != '-' || !Digits(s, 5, 2) || s[7] != '-' ||
      !Digits(s, 8, 2)) {
    return false;
  }
  const int year = std::stoi(s.substr(0, 4));
  const int month = std::stoi(s.substr(5, 2));
  const int day = std::stoi(s.substr(8, 2));
  if (month < 1 || month > 12 || day < 1) return false;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int days = kDays[month - 1];
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month == 2 && leap) days = 29;
  return day <= days;
}

// strfmt.IsDateTime: an RFC 3339 date, "T" (either case), then
// hh:mm:ss[.fraction] and "Z" or an offset.
bool IsDateTime(const std::string& str) {
  if (str.size() < 4) return false;
  std::string lower = str;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t t = lower.find('t');
  if (t == std::string::npos || !IsDate(lower.substr(0, t))) return false;
  // Go splits on every "t"; a second one leaves a time part that fails below.
  const std::string time = lower.substr(t + 1);
  static const std::regex kTime(
      R"(^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$)");
  std::smatch m;
  if (!std::regex_search(time, m, kTime)) return false;
  return m[1].str() <= "23" && m[2].str() <= "59" && m[3].str() <= "59";
}

bool IsBase64(const std::string& s) {
  static const std::regex kBase64(
      R"(^(?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|[A-Za-z0-9+\/]{4})$)");
  return std::regex_search(s, kBase64);
}

bool IsUuid(const std::string& s) {
  static const std::regex kUuid(
      "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$");
  return std::regex_search(s, kUuid);
}

// Whether `value` is a valid `format` string; formats this server does not
// implement pass.
bool ValidFormat(const std::string& format, const std::string& value) {
  std::string normalized = format;
  normalized.erase(std::remove(normalized.begin(), normalized.end(), '-'), normalized.end());
  if (normalized == "datetime") return IsDateTime(value);
  if (normalized == "date") return IsDate(value);
  if (normalized == "byte") return IsBase64(value);
  if (normalized == "uuid") return IsUuid(value);
  return true;
}

// Compiled patterns, shared: the same few schemas validate every write.
std::shared_ptr<const std::regex> CompilePattern(const std::string& pattern, std::string* error) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const std::regex>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(pattern);
    if (it != cache.end()) return it->second;
  }
  std::shared_ptr<const std::regex> re;
  try {
    re = std::make_shared<const std::regex>(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    if (error != nullptr) *error = e.what();
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace(pattern, re);
  return re;
}

size_t Utf8Length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

// Semantic JSON equality with numbers compared by value (an enum of 1 takes
// 1.0, as Go's conversion does).
bool JsonEqual(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) {
    if (!a.is_number_float() && !b.is_number_float()) return a == b;
    return a.get<double>() == b.get<double>();
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!JsonEqual(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !JsonEqual(it.value(), *other)) return false;
    }
    return true;
  }
  return a == b;
}

// --- the value validator (kube-openapi's SchemaValidator) ---------------------------

// An error as kube-openapi produces it, before apiextensions turns it into a
// field.Error: a validation error has the value's path (`name`); any other
// error (anyOf/oneOf/allOf/not) has none and reports at the root.
struct OpenApiError {
  enum Code {
    kInvalidType,
    kRequired,
    kTooLong,
    kTooShort,
    kPattern,
    kEnum,
    kMultipleOf,
    kMax,
    kMin,
    kMaxItems,
    kMinItems,
    kTooFewProperties,
    kTooManyProperties,
    kUnallowedProperty,
    kComposite
  };
  Code code;
  std::string name;  // the value's path, "spec.gpus" (may start with ".")
  std::string message;
  json value;                     // err.Value
  int64_t valid = -1;             // err.Valid: the limit, where there is one
  std::vector<json> enum_values;  // for kEnum
};

std::string In(const std::string& name) { return name + " in body"; }

class Validator {
 public:
  std::vector<OpenApiError> errors;

  // The errors, as many as validating `data` at `path` against `schema` found.
  void Validate(const json& data, const json& schema, const std::string& path) {
    const std::vector<std::string> types = Types(schema);
    const std::string format = Format(schema);
    const bool type_applies = !types.empty() || !format.empty();
    if (data.is_null()) {
      if (type_applies) ValidateType(data, schema, types, format, path);
      ValidateEnum(data, schema, path);
      return;
    }
    const Kind kind = KindOf(data);
    if (type_applies) ValidateType(data, schema, types, format, path);
    ValidateSchemaProps(data, schema, path);
    if (kind == Kind::kString) {
      ValidateString(data.get<std::string>(), schema, path);
      if (!format.empty() && !ValidFormat(format, data.get<std::string>())) {
        Add(OpenApiError::kInvalidType, path,
            In(path) + " must be of type " + format + ": " + GoQuote(data.get<std::string>()),
            data);
      }
    }
    if (kind == Kind::kInt || kind == Kind::kFloat) ValidateNumber(data, kind, schema, path);
    if (kind == Kind::kArray) ValidateArray(data, schema, path);
    ValidateEnum(data, schema, path);
    if (kind == Kind::kObject) ValidateObjectFields(data, schema, path);
  }

 private:
  void Add(OpenApiError::Code code, const std::string& name, const std::string& message,
           json value = json(), int64_t valid = -1) {
    errors.push_back(OpenApiError{code, name, message, std::move(value), valid, {}});
  }
  void AddComposite(const std::string& message) {
    errors.push_back(OpenApiError{OpenApiError::kComposite, "", message, json(), -1, {}});
  }

  // typeValidator.Validate
  void ValidateType(const json& data, const json& schema, const std::vector<std::string>& types,
                    const std::string& format, const std::string& path) {
    if (data.is_null()) {
      if (!types.empty() && !Contains(types, "null") && !Flag(schema, "nullable")) {
        Add(OpenApiError::kInvalidType, path,
            In(path) + " must be of type " + Join(types, ",") + ": " + GoQuote("null"), "null");
      }
      return;
    }
    const Kind kind = KindOf(data);
    const std::string type = SchemaType(kind);
    const bool float_int =
        kind == Kind::kFloat && IsJsonInteger(AsFloat(data)) && Contains(types, "integer");
    const bool int_float = kind == Kind::kInt && Contains(types, "number");
    if (kind != Kind::kString && kind != Kind::kArray && !format.empty() &&
        !(Contains(types, type) || GoFormat(kind) == format || float_int || int_float)) {
      const std::string inferred = GoFormat(kind);
      Add(OpenApiError::kInvalidType, path,
          In(path) + " must be of type " + format + ": " + GoQuote(inferred), inferred);
      return;
    }
    if (!(Contains(types, "number") || Contains(types, "integer")) && !format.empty() &&
        (kind == Kind::kString || kind == Kind::kArray)) {
      return;
    }
    if (!(Contains(types, type) || float_int || int_float)) {
      Add(OpenApiError::kInvalidType, path,
          In(path) + " must be of type " + Join(types, ",") + ": " + GoQuote(type), type);
    }
  }

  // schemaPropsValidator: allOf, anyOf, oneOf and not, each branch validated
  // at the same path. Of the failing branches the one with the fewest errors
  // stands for them (kube-openapi picks the one that passed most checks).
  void ValidateSchemaProps(const json& data, const json& schema, const std::string& path) {
    auto branches = [&](const char* key) {
      std::vector<std::vector<OpenApiError>> results;
      const json* list = Member(schema, key);
      if (list == nullptr || !list->is_array()) return results;
      for (const json& branch : *list) {
        Validator sub;
        sub.Validate(data, branch, path);
        results.push_back(std::move(sub.errors));
      }
      return results;
    };
    auto best_failure = [](const std::vector<std::vector<OpenApiError>>& results) {
      const std::vector<OpenApiError>* best = nullptr;
      for (const auto& r : results) {
        if (!r.empty() && (best == nullptr || r.size() < best->size())) best = &r;
      }
      return best;
    };
    const std::string quoted = GoQuote(path);
    auto any_of = branches("anyOf");
    if (!any_of.empty()) {
      bool passed = false;
      for (const auto& r : any_of) passed = passed || r.empty();
      if (!passed) {
        AddComposite(quoted + " must validate at least one schema (anyOf)");
        const auto* best = best_failure(any_of);
        errors.insert(errors.end(), best->begin(), best->end());
      }
    }
    auto one_of = branches("oneOf");
    if (!one_of.empty()) {
      int valid = 0;
      for (const auto& r : one_of) valid += r.empty() ? 1 : 0;
      if (valid != 1) {
        AddComposite(quoted + " must validate one and only one schema (oneOf). " +
                     (valid == 0 ? std::string("Found none valid")
                                 : "Found " + std::to_string(valid) + " valid alternatives"));
        if (valid == 0) {
          const auto* best = best_failure(one_of);
          errors.insert(errors.end(), best->begin(), best->end());
        }
      }
    }
    auto all_of = branches("allOf");
    if (!all_of.empty()) {
      size_t valid = 0;
      for (const auto& r : all_of) {
        valid += r.empty() ? 1 : 0;
        errors.insert(errors.end(), r.begin(), r.end());
      }
      if (valid != all_of.size()) {
        AddComposite(quoted + " must validate all the schemas (allOf)" +
                     (valid == 0 ? ". None validated" : ""));
      }
    }
    if (const json* not_schema = Member(schema, "not"); not_schema != nullptr) {
      Validator sub;
      sub.Validate(data, *not_schema, path);
      if (sub.errors.empty()) AddComposite(quoted + " must not validate the schema (not)");
    }
  }

  // stringValidator: the first of maxLength, minLength, pattern that fails.
  void ValidateString(const std::string& s, const json& schema, const std::string& path) {
    const int64_t length = static_cast<int64_t>(Utf8Length(s));
    if (auto max = IntMember(schema, "maxLength"); max && length > *max) {
      Add(OpenApiError::kTooLong, path,
          In(path) + " should be at most " + std::to_string(*max) + " chars long", s, *max);
      return;
    }
    if (auto min = IntMember(schema, "minLength"); min && length < *min) {
      Add(OpenApiError::kTooShort, path,
          In(path) + " should be at least " + std::to_string(*min) + " chars long", s, *min);
      return;
    }
    const json* pattern = Member(schema, "pattern");
    if (pattern != nullptr && pattern->is_string() && !pattern->get<std::string>().empty()) {
      std::string error;
      auto re = CompilePattern(pattern->get<std::string>(), &error);
      if (re == nullptr) {
        Add(OpenApiError::kPattern, path,
            In(path) + " should match '" + pattern->get<std::string>() +
                ", but pattern is invalid: " + error + "'",
            s);
      } else if (!std::regex_search(s, *re)) {
        Add(OpenApiError::kPattern, path,
            In(path) + " should match '" + pattern->get<std::string>() + "'", s);
      }
    }
  }

  // numberValidator: multipleOf, minimum, maximum. An integer is compared
  // with the bound truncated to an integer, a float with the bound itself.
  void ValidateNumber(const json& data, Kind kind, const json& schema, const std::string& path) {
    const bool is_int = kind == Kind::kInt;
    auto bound = [&](double b) {
      return is_int ? std::to_string(static_cast<int64_t>(b)) : GoFloat(b);
    };
    if (auto factor = FloatMember(schema, "multipleOf"); factor && *factor != 0) {
      bool multiple = true;
      if (*factor < 0) {
        AddComposite("factor MultipleOf declared for " + path +
                     " must be positive: " + GoFloat(*factor));
      } else if (is_int && *factor >= 1 && std::trunc(*factor) == *factor) {
        multiple = AsInt(data) % static_cast<int64_t>(*factor) == 0;
      } else {
        const double d = AsFloat(data);
        const double mult = *factor < 1 ? 1 / *factor * d : d / *factor;
        multiple = IsJsonInteger(mult);
      }
      if (!multiple) {
        Add(OpenApiError::kMultipleOf, path,
            In(path) + " should be a multiple of " + bound(*factor), data);
      }
    }
    if (auto min = FloatMember(schema, "minimum")) {
      ValidateBound(data, is_int, *min, Flag(schema, "exclusiveMinimum"), true, path);
    }
    if (auto max = FloatMember(schema, "maximum")) {
      ValidateBound(data, is_int, *max, Flag(schema, "exclusiveMaximum"), false, path);
    }
  }

  // A minimum (`lower`) or maximum.
  void ValidateBound(const json& data, bool is_int, double limit, bool exclusive, bool lower,
                     const std::string& path) {
    int order;  // data compared with the limit: -1, 0 or 1
    if (is_int) {
      const int64_t v = AsInt(data);
      const auto m = static_cast<int64_t>(limit);
      order = v < m ? -1 : (v > m ? 1 : 0);
    } else {
      const double v = AsFloat(data);
      order = v < limit ? -1 : (v > limit ? 1 : 0);
    }
    const bool fails =
        lower ? (exclusive ? order <= 0 : order < 0) : (exclusive ? order >= 0 : order > 0);
    if (!fails) return;
    const char* relation =
        lower ? (exclusive ? " should be greater than " : " should be greater than or equal to ")
              : (exclusive ? " should be less than " : " should be less than or equal to ");
    const std::string bound = is_int ? std::to_string(static_cast<int64_t>(limit)) : GoFloat(limit);
    Add(lower ? OpenApiError::kMin : OpenApiError::kMax, path, In(path) + relation + bound, data);
  }

  // schemaSliceValidator: every item, then minItems, maxItems, uniqueItems.
  void ValidateArray(const json& data, const json& schema, const std::string& path) {
    if (const json* items = Items(schema)) {
      for (size_t i = 0; i < data.size(); ++i) {
        Validate(data[i], *items, path + "[" + std::to_string(i) + "]");
      }
    }
    const auto size = static_cast<int64_t>(data.size());
    if (auto min = IntMember(schema, "minItems"); min && size < *min) {
      Add(OpenApiError::kMinItems, path,
          In(path) + " should have at least " + std::to_string(*min) + " items", size, *min);
    }
    if (auto max = IntMember(schema, "maxItems"); max && size > *max) {
      Add(OpenApiError::kMaxItems, path,
          In(path) + " should have at most " + std::to_string(*max) + " items", size, *max);
    }
    if (Flag(schema, "uniqueItems")) {
      for (size_t i = 0; i < data.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (JsonEqual(data[i], data[j])) {
            Add(OpenApiError::kComposite, path, In(path) + " shouldn't contain duplicates");
            return;
          }
        }
      }
    }
  }

  void ValidateEnum(const json& data, const json& schema, const std::string& path) {
    const json* values = Member(schema, "enum");
    if (values == nullptr || !values->is_array() || values->empty()) return;
    for (const json& v : *values) {
      if (!data.is_null() && JsonEqual(data, v)) return;
    }
    std::string listed;
    for (const json& v : *values) listed += (listed.empty() ? "" : " ") + GoJson(v);
    OpenApiError error{
        OpenApiError::kEnum, path, In(path) + " should be one of [" + listed + "]", data, -1, {}};
    error.enum_values.assign(values->begin(), values->end());
    errors.push_back(std::move(error));
  }

  // objectValidator: a failing min/maxProperties ends the object's checks;
  // then forbidden and additional properties, each declared property (by
  // name), and the required ones (in the order `required` lists them).
  void ValidateObjectFields(const json& data, const json& schema, const std::string& path) {
    const auto count = static_cast<int64_t>(data.size());
    if (auto min = IntMember(schema, "minProperties"); min && count < *min) {
      Add(OpenApiError::kTooFewProperties, path,
          In(path) + " should have at least " + std::to_string(*min) + " properties", count, *min);
      return;
    }
    if (auto max = IntMember(schema, "maxProperties"); max && count > *max) {
      Add(OpenApiError::kTooManyProperties, path,
          In(path) + " should have at most " + std::to_string(*max) + " properties", count, *max);
      return;
    }
    auto child = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
    const json* ap = Member(schema, "additionalProperties");
    for (auto it = data.begin(); it != data.end(); ++it) {
      if (Property(schema, it.key()) != nullptr) continue;
      if (ap != nullptr && ap->is_boolean() && !ap->get<bool>()) {
        Add(OpenApiError::kUnallowedProperty, path,
            path + "." + it.key() + " in body is a forbidden property", it.key());
      } else if (ap != nullptr && ap->is_object()) {
        Validate(it.value(), *ap, path + "." + it.key());
      }
    }
    if (const json* props = Properties(schema)) {
      for (auto p = props->begin(); p != props->end(); ++p) {
        auto value = data.find(p.key());
        if (value != data.end()) Validate(*value, p.value(), child(p.key()));
      }
    }
    const json* required = Member(schema, "required");
    if (required != nullptr && required->is_array()) {
      for (const json& r : *required) {
        if (r.is_string() && !data.contains(r.get<std::string>())) {
          Add(OpenApiError::kRequired, path + "." + r.get<std::string>(),
              In(path + "." + r.get<std::string>()) + " is required");
        }
      }
    }
  }
};

// kubeOpenAPIResultToFieldErrors: `base` is the field path the value sits at
// ("" for a custom object, which kube-apiserver validates with a nil path).
std::vector<FieldError> ToFieldErrors(const std::vector<OpenApiError>& errors,
                                      const std::string& base) {
  std::vector<FieldError> out;
  const std::string root = base.empty() ? "<nil>" : base;
  for (const OpenApiError& e : errors) {
    std::string field = root;
    std::string name = e.name;
    if (!name.empty() && name != ".") {
      if (name[0] == '.') name.erase(0, 1);
      field = base.empty() ? name : base + "." + name;
    }
    const std::string value = e.value.is_null() ? GoQuote("") : GoValue(e.value);
    switch (e.code) {
      case OpenApiError::kComposite:
        out.push_back(Invalid(root, GoQuote(""), e.message));
        break;
      case OpenApiError::kRequired:
        out.push_back(Required(field, ""));
        break;
      case OpenApiError::kEnum: {
        std::vector<std::string> values;
        for (const json& v : e.enum_values) {
          values.push_back(v.is_string() ? v.get<std::string>() : GoJson(v));
        }
        out.push_back(NotSupported(field, GoValue(e.value), values));
        break;
      }
      case OpenApiError::kTooLong:
        out.push_back(TooLong(field, e.valid));
        break;
      case OpenApiError::kMaxItems:
      case OpenApiError::kTooManyProperties:
        out.push_back(TooMany(field, e.value.get<int64_t>(), e.valid));
        break;
      case OpenApiError::kInvalidType:
        out.push_back(TypeInvalid(field, value, e.message));
        break;
      default:
        out.push_back(Invalid(field, value, e.message));
        break;
    }
  }
  return out;
}

// --- pruning and defaulting ---------------------------------------------------------

std::string ChildPath(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

void Prune(json& x, const json* s, bool embedded, const std::string& path,
           std::vector<std::string>& pruned);

// Prunes the value of field `key` of an object by the schema that declares
// it (a property, or additionalProperties); false when `s` declares no such
// field.
bool PruneDeclared(json& value, const json& s, const std::string& key, const std::string& path,
                   std::vector<std::string>& pruned) {
  if (const json* prop = Property(s, key)) {
    Prune(value, prop, Flag(*prop, "x-kubernetes-embedded-resource"), ChildPath(path, key), pruned);
    return true;
  }
  if (auto ap = AdditionalProperties(s)) {
    Prune(value, *ap, *ap != nullptr && Flag(**ap, "x-kubernetes-embedded-resource"),
          ChildPath(path, key), pruned);
    return true;
  }
  return false;
}

// Below x-kubernetes-preserve-unknown-fields: unknown fields stay, declared
// ones are still pruned inside.
void SkipPrune(json& x, const json* s, const std::string& path, std::vector<std::string>& pruned) {
  if (s == nullptr) return;
  const bool embedded = Flag(*s, "x-kubernetes-embedded-resource");
  if (x.is_object()) {
    for (auto it = x.begin(); it != x.end(); ++it) {
      const std::string& k = it.key();
      if (embedded && (k == "apiVersion" || k == "kind" || k == "metadata")) continue;
      PruneDeclared(it.value(), *s, k, path, pruned);
    }
  } else if (x.is_array()) {
    for (size_t i = 0; i < x.size(); ++i) {
      SkipPrune(x[i], Items(*s), path + "[" + std::to_string(i) + "]", pruned);
    }
  }
}

void Prune(json& x, const json* s, bool embedded, const std::string& path,
           std::vector<std::string>& pruned) {
  if (s != nullptr && Flag(*s, "x-kubernetes-preserve-unknown-fields")) {
    SkipPrune(x, s, path, pruned);
    return;
  }
  if (x.is_object()) {
    std::vector<std::string> drop;
    for (auto it = x.begin(); it != x.end(); ++it) {
      const std::string& k = it.key();
      if (s == nullptr) {
        drop.push_back(k);
        continue;
      }
      if (embedded && (k == "apiVersion" || k == "kind") && it.value().is_string()) continue;
      if (embedded && k == "metadata" && it.value().is_object()) continue;
      if (!PruneDeclared(it.value(), *s, k, path, pruned)) drop.push_back(k);
    }
    for (const std::string& k : drop) {
      pruned.push_back(ChildPath(path, k));
      x.erase(k);
    }
  } else if (x.is_array()) {
    const json* items = s == nullptr ? nullptr : Items(*s);
    for (size_t i = 0; i < x.size(); ++i) {
      Prune(x[i], items, items != nullptr && Flag(*items, "x-kubernetes-embedded-resource"),
            path + "[" + std::to_string(i) + "]", pruned);
    }
  }
}

bool HasDefault(const json* s) { return s != nullptr && s->is_object() && s->contains("default"); }

bool NonNullableNull(const json& v, const json* s) {
  return v.is_null() && s != nullptr && !Flag(*s, "nullable");
}

// structuraldefaulting.PruneNonNullableNullsWithoutDefaults
void PruneNulls(json& x, const json* s) {
  if (s == nullptr) return;
  if (x.is_object()) {
    std::vector<std::string> drop;
    auto ap = AdditionalProperties(*s);
    for (auto it = x.begin(); it != x.end(); ++it) {
      const json* prop = Property(*s, it.key());
      if (prop == nullptr && ap && *ap != nullptr) prop = *ap;
      if (prop == nullptr) continue;
      if (it.value().is_null() && !Flag(*prop, "nullable") && !HasDefault(prop)) {
        drop.push_back(it.key());
      } else {
        PruneNulls(it.value(), prop);
      }
    }
    for (const std::string& k : drop) x.erase(k);
  } else if (x.is_array()) {
    for (json& item : x) PruneNulls(item, Items(*s));
  }
}

// structuraldefaulting.Default
void Default(json& x, const json* s) {
  if (s == nullptr) return;
  if (x.is_object()) {
    if (const json* props = Properties(*s)) {
      for (auto p = props->begin(); p != props->end(); ++p) {
        if (!HasDefault(&p.value())) continue;
        auto v = x.find(p.key());
        if (v == x.end() || NonNullableNull(*v, &p.value())) x[p.key()] = p.value()["default"];
      }
    }
    auto ap = AdditionalProperties(*s);
    for (auto it = x.begin(); it != x.end(); ++it) {
      if (const json* prop = Property(*s, it.key())) {
        Default(it.value(), prop);
      } else if (ap && *ap != nullptr) {
        if (NonNullableNull(it.value(), *ap) && HasDefault(*ap)) it.value() = (**ap)["default"];
        Default(it.value(), *ap);
      }
    }
  } else if (x.is_array()) {
    const json* items = Items(*s);
    for (json& item : x) {
      if (NonNullableNull(item, items) && HasDefault(items)) item = (*items)["default"];
      Default(item, items);
    }
  }
}

// --- CustomResourceDefinition checks -----------------------------------------------

// field.Path rendering of a schema location.
std::string Key(const std::string& path, const char* child, const std::string& key) {
  return path + "." + child + "[" + key + "]";
}

const std::set<std::string>& OpenApiTypes() {
  static const std::set<std::string> kTypes = {"array",  "boolean", "integer",
                                               "number", "object",  "string"};
  return kTypes;
}

// ValidateCustomResourceDefinitionOpenAPISchema's checks that apply to any
// schema node, recursing into everything below.
void ValidateSchemaNode(const json& s, const std::string& path, std::vector<FieldError>& errors) {
  if (!s.is_object()) return;
  if (s.contains("$ref")) errors.push_back(Forbidden(path + ".$ref", "$ref is not supported"));
  if (const json* type = Member(s, "type"); type != nullptr && type->is_string() &&
                                            !type->get<std::string>().empty() &&
                                            OpenApiTypes().count(type->get<std::string>()) == 0) {
    errors.push_back(NotSupported(path + ".type", GoQuote(type->get<std::string>()),
                                  {OpenApiTypes().begin(), OpenApiTypes().end()}));
  }
  if (Flag(s, "uniqueItems")) {
    errors.push_back(Forbidden(path + ".uniqueItems",
                               "uniqueItems cannot be set to true since the runtime complexity "
                               "becomes quadratic"));
  }
  const json* ap = Member(s, "additionalProperties");
  if (ap != nullptr && HasProperties(s) &&
      (ap->is_object() || (ap->is_boolean() && !ap->get<bool>()))) {
    errors.push_back(Forbidden(path + ".additionalProperties",
                               "additionalProperties and properties are mutual exclusive"));
  }
  if (const json* rules = Member(s, "x-kubernetes-validations"); rules != nullptr) {
    if (!rules->is_array()) {
      errors.push_back(
          Invalid(path + ".x-kubernetes-validations", GoValue(*rules), "must be a list of rules"));
    } else {
      for (size_t i = 0; i < rules->size(); ++i) {
        const json& rule = (*rules)[i];
        if (!rule.is_object() || !rule.contains("rule") || !rule["rule"].is_string() ||
            rule["rule"].get<std::string>().empty()) {
          errors.push_back(
              Required(path + ".x-kubernetes-validations[" + std::to_string(i) + "].rule", ""));
        }
      }
    }
  }
  if (s.contains("default")) {
    // A default must survive pruning unchanged and validate.
    json value = s["default"];
    std::vector<std::string> pruned;
    Prune(value, &s, Flag(s, "x-kubernetes-embedded-resource"), "", pruned);
    if (!pruned.empty()) {
      errors.push_back(
          Invalid(path + ".default", GoValue(s["default"]), "must not have unknown fields"));
    } else {
      Validator v;
      v.Validate(value, s, "");
      for (FieldError& e : ToFieldErrors(v.errors, path + ".default")) errors.push_back(e);
    }
  }
  if (const json* props = Properties(s)) {
    for (auto p = props->begin(); p != props->end(); ++p) {
      ValidateSchemaNode(p.value(), Key(path, "properties", p.key()), errors);
    }
  }
  if (const json* items = Items(s)) ValidateSchemaNode(*items, path + ".items", errors);
  if (ap != nullptr && ap->is_object()) {
    ValidateSchemaNode(*ap, path + ".additionalProperties", errors);
  }
  for (const char* junctor : {"allOf", "anyOf", "oneOf"}) {
    const json* list = Member(s, junctor);
    if (list == nullptr || !list->is_array()) continue;
    for (size_t i = 0; i < list->size(); ++i) {
      ValidateSchemaNode((*list)[i], path + "." + junctor + "[" + std::to_string(i) + "]", errors);
    }
  }
  if (const json* n = Member(s, "not")) ValidateSchemaNode(*n, path + ".not", errors);
}

enum class Level { kRoot, kItem, kField };

bool IsIntOrStringPattern(const json* list) {
  if (list == nullptr || !list->is_array() || list->size() != 2) return false;
  const json a = {{"type", "integer"}};
  const json b = {{"type", "string"}};
  return (*list)[0] == a && (*list)[1] == b;
}

void ValidateNested(const json& v, bool skip_any_of, bool skip_first_all_of_any_of, Level level,
                    const std::string& path, std::vector<FieldError>& errors);

// validateValueValidation
void ValidateValueValidation(const json& s, bool skip_any_of, bool skip_first_all_of_any_of,
                             Level level, const std::string& path,
                             std::vector<FieldError>& errors) {
  if (!skip_any_of) {
    if (const json* list = Member(s, "anyOf"); list != nullptr && list->is_array()) {
      for (size_t i = 0; i < list->size(); ++i) {
        ValidateNested((*list)[i], false, false, level, path + ".anyOf[" + std::to_string(i) + "]",
                       errors);
      }
    }
  }
  if (const json* list = Member(s, "allOf"); list != nullptr && list->is_array()) {
    for (size_t i = 0; i < list->size(); ++i) {
      ValidateNested((*list)[i], skip_first_all_of_any_of && i == 0, false, level,
                     path + ".allOf[" + std::to_string(i) + "]", errors);
    }
  }
  if (const json* list = Member(s, "oneOf"); list != nullptr && list->is_array()) {
    for (size_t i = 0; i < list->size(); ++i) {
      ValidateNested((*list)[i], false, false, level, path + ".oneOf[" + std::to_string(i) + "]",
                     errors);
    }
  }
  if (const json* n = Member(s, "not"))
    ValidateNested(*n, false, false, level, path + ".not", errors);
  if (const json* pattern = Member(s, "pattern");
      pattern != nullptr && pattern->is_string() && !pattern->get<std::string>().empty()) {
    std::string error;
    if (CompilePattern(pattern->get<std::string>(), &error) == nullptr) {
      errors.push_back(Invalid(path + ".pattern", GoQuote(pattern->get<std::string>()),
                               "must be a valid regular expression, but isn't: " + error));
    }
  }
}

// validateNestedValueValidation: below allOf/anyOf/oneOf/not only value
// validations may appear.
void ValidateNested(const json& v, bool skip_any_of, bool skip_first_all_of_any_of, Level level,
                    const std::string& path, std::vector<FieldError>& errors) {
  if (!v.is_object()) return;
  ValidateValueValidation(v, skip_any_of, skip_first_all_of_any_of, level, path, errors);
  if (const json* items = Items(v))
    ValidateNested(*items, false, false, level, path + ".items", errors);
  if (const json* props = Properties(v)) {
    for (auto p = props->begin(); p != props->end(); ++p) {
      ValidateNested(p.value(), false, false, Level::kField, Key(path, "properties", p.key()),
                     errors);
    }
    if (props->contains("metadata")) {
      errors.push_back(Forbidden(Key(path, "properties", "metadata"),
                                 "must not be specified in a nested context"));
    }
  }
  if (const json* type = Member(v, "type");
      type != nullptr && type->is_string() && !type->get<std::string>().empty()) {
    errors.push_back(Forbidden(path + ".type", "must be empty to be structural"));
  }
  if (v.contains("additionalProperties")) {
    errors.push_back(
        Forbidden(path + ".additionalProperties", "must be undefined to be structural"));
  }
  if (v.contains("default")) {
    errors.push_back(Forbidden(path + ".default", "must be undefined to be structural"));
  }
  for (const char* key : {"title", "description"}) {
    if (const json* text = Member(v, key); text != nullptr && text->is_string() && !text->empty()) {
      errors.push_back(Forbidden(path + "." + key, "must be empty to be structural"));
    }
  }
  for (const char* key : {"nullable", "x-kubernetes-preserve-unknown-fields",
                          "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string"}) {
    if (Flag(v, key))
      errors.push_back(Forbidden(path + "." + key, "must be false to be structural"));
  }
  if (const json* keys = Member(v, "x-kubernetes-list-map-keys");
      keys != nullptr && keys->is_array() && !keys->empty()) {
    errors.push_back(
        Forbidden(path + ".x-kubernetes-list-map-keys", "must be empty to be structural"));
  }
  if (v.contains("x-kubernetes-list-type")) {
    errors.push_back(
        Forbidden(path + ".x-kubernetes-list-type", "must be undefined to be structural"));
  }
}

// validateStructuralInvariants
void ValidateStructuralInvariants(const json& s, Level level, const std::string& path,
                                  std::vector<FieldError>& errors) {
  if (!s.is_object()) return;
  const std::string type =
      Member(s, "type") != nullptr && s["type"].is_string() ? s["type"].get<std::string>() : "";
  const json* items = Items(s);
  if (type == "array" && items == nullptr) {
    errors.push_back(Required(path + ".items", "must be specified"));
  }
  if (items != nullptr) ValidateStructuralInvariants(*items, Level::kItem, path + ".items", errors);
  if (const json* props = Properties(s)) {
    for (auto p = props->begin(); p != props->end(); ++p) {
      ValidateStructuralInvariants(p.value(), Level::kField, Key(path, "properties", p.key()),
                                   errors);
    }
  }
  // validateGeneric
  if (const json* ap = Member(s, "additionalProperties")) {
    if (level == Level::kRoot) {
      errors.push_back(Forbidden(path + ".additionalProperties", "must not be used at the root"));
    }
    if (ap->is_object()) {
      ValidateStructuralInvariants(*ap, Level::kField, path + ".additionalProperties", errors);
    }
  }
  // validateExtensions
  const bool int_or_string = Flag(s, "x-kubernetes-int-or-string");
  const bool preserve = Flag(s, "x-kubernetes-preserve-unknown-fields");
  const bool embedded = Flag(s, "x-kubernetes-embedded-resource");
  if (int_or_string && preserve) {
    errors.push_back(Invalid(path + ".x-kubernetes-preserve-unknown-fields", "true",
                             "must be false if x-kubernetes-int-or-string is true"));
  }
  if (int_or_string && embedded) {
    errors.push_back(Invalid(path + ".x-kubernetes-embedded-resource", "true",
                             "must be false if x-kubernetes-int-or-string is true"));
  }
  ValidateValueValidation(s, IsIntOrStringPattern(Member(s, "anyOf")),
                          Member(s, "allOf") != nullptr && s["allOf"].is_array() &&
                              !s["allOf"].empty() &&
                              IsIntOrStringPattern(Member(s["allOf"][0], "anyOf")),
                          level, path, errors);
  const bool check_metadata = level == Level::kRoot || embedded;
  if (embedded && type != "object") {
    if (type.empty()) {
      errors.push_back(
          Required(path + ".type", "must be object if x-kubernetes-embedded-resource is true"));
    } else {
      errors.push_back(Invalid(path + ".type", GoQuote(type),
                               "must be object if x-kubernetes-embedded-resource is true"));
    }
  } else if (type.empty() && !int_or_string && !preserve) {
    const char* detail = level == Level::kRoot   ? "must not be empty at the root"
                         : level == Level::kItem ? "must not be empty for specified array items"
                                                 : "must not be empty for specified object fields";
    errors.push_back(Required(path + ".type", detail));
  }
  if (embedded && s.contains("additionalProperties")) {
    errors.push_back(Forbidden(path + ".additionalProperties",
                               "must not be used if x-kubernetes-embedded-resource is set"));
  }
  if (level == Level::kRoot && !type.empty() && type != "object") {
    errors.push_back(Invalid(path + ".type", GoQuote(type), "must be object at the root"));
  }
  auto prop_type = [&](const char* name) -> std::optional<std::string> {
    const json* p = Property(s, name);
    if (p == nullptr) return std::nullopt;
    return p->value("type", "");
  };
  if (check_metadata) {
    if (auto t = prop_type("kind"); t && *t != "string") {
      errors.push_back(
          Invalid(Key(path, "properties", "kind") + ".type", GoQuote(*t), "must be string"));
    }
    if (auto t = prop_type("apiVersion"); t && *t != "string") {
      errors.push_back(
          Invalid(Key(path, "properties", "apiVersion") + ".type", GoQuote(*t), "must be string"));
    }
    if (auto t = prop_type("metadata"); t && *t != "object") {
      errors.push_back(
          Invalid(Key(path, "properties", "metadata") + ".type", GoQuote(*t), "must be object"));
    }
  }
  if (level == Level::kRoot) {
    if (const json* metadata = Property(s, "metadata")) {
      // Only name and generateName may be restricted, and only with value
      // validations.
      json rest = *metadata;
      rest.erase("type");
      rest.erase("default");
      rest.erase("description");
      if (rest.contains("properties") && rest["properties"].is_object()) {
        json props = rest["properties"];
        const bool only_names =
            !props.empty() && props.size() <= 2 &&
            std::all_of(props.items().begin(), props.items().end(), [](const auto& p) {
              return p.key() == "name" || p.key() == "generateName";
            });
        if (only_names) rest.erase("properties");
      }
      if (!rest.empty()) {
        errors.push_back(Forbidden(Key(path, "properties", "metadata"),
                                   "must not specify anything other than name and generateName, "
                                   "but metadata is implicitly specified"));
      }
    }
  }
  if (embedded && !preserve && !HasProperties(s)) {
    errors.push_back(Required(path + ".properties",
                              "must not be empty if x-kubernetes-embedded-resource is true "
                              "without x-kubernetes-preserve-unknown-fields"));
  }
}

// validateStructuralCompleteness: what a value validation names must exist
// in the structural part of the schema too.
void ValidateCompletenessNested(const json& v, const json* s, const std::string& s_path,
                                const std::string& v_path, std::vector<FieldError>& errors);

void ValidateCompleteness(const json& v, const json* s, const std::string& s_path,
                          const std::string& v_path, std::vector<FieldError>& errors) {
  const bool has_junctors =
      v.contains("allOf") || v.contains("anyOf") || v.contains("oneOf") || v.contains("not");
  if (!has_junctors) return;
  if (s == nullptr) {
    errors.push_back(Required(s_path, "because it is defined in " + v_path));
    return;
  }
  if (const json* n = Member(v, "not")) {
    ValidateCompletenessNested(*n, s, s_path, v_path + ".not", errors);
  }
  for (const char* junctor : {"allOf", "anyOf", "oneOf"}) {
    const json* list = Member(v, junctor);
    if (list == nullptr || !list->is_array()) continue;
    for (size_t i = 0; i < list->size(); ++i) {
      ValidateCompletenessNested((*list)[i], s, s_path,
                                 v_path + "." + junctor + "[" + std::to_string(i) + "]", errors);
    }
  }
}

void ValidateCompletenessNested(const json& v, const json* s, const std::string& s_path,
                                const std::string& v_path, std::vector<FieldError>& errors) {
  if (!v.is_object()) return;
  ValidateCompleteness(v, s, s_path, v_path, errors);
  if (const json* items = Items(v)) {
    const json* s_items = s == nullptr ? nullptr : Items(*s);
    if (s_items == nullptr) {
      errors.push_back(
          Required(s_path + ".items", "because it is defined in " + v_path + ".items"));
    } else {
      ValidateCompletenessNested(*items, s_items, s_path + ".items", v_path + ".items", errors);
    }
  }
  if (const json* props = Properties(v)) {
    for (auto p = props->begin(); p != props->end(); ++p) {
      const json* s_prop = s == nullptr ? nullptr : Property(*s, p.key());
      if (s_prop == nullptr) {
        errors.push_back(
            Required(Key(s_path, "properties", p.key()),
                     "because it is defined in " + Key(v_path, "properties", p.key())));
      } else {
        ValidateCompletenessNested(p.value(), s_prop, Key(s_path, "properties", p.key()),
                                   Key(v_path, "properties", p.key()), errors);
      }
    }
  }
}

void ValidateCompletenessEverywhere(const json& s, const std::string& path,
                                    std::vector<FieldError>& errors) {
  if (!s.is_object()) return;
  ValidateCompleteness(s, &s, path, path, errors);
  if (const json* props = Properties(s)) {
    for (auto p = props->begin(); p != props->end(); ++p) {
      ValidateCompletenessEverywhere(p.value(), Key(path, "properties", p.key()), errors);
    }
  }
  if (const json* items = Items(s)) ValidateCompletenessEverywhere(*items, path + ".items", errors);
  if (const json* ap = Member(s, "additionalProperties"); ap != nullptr && ap->is_object()) {
    ValidateCompletenessEverywhere(*ap, path + ".additionalProperties", errors);
  }
}

void CollectCelRules(const json& s, const std::string& path, std::vector<CelRule>& out) {
  if (!s.is_object()) return;
  if (const json* rules = Member(s, "x-kubernetes-validations");
      rules != nullptr && rules->is_array()) {
    for (const json& r : *rules) {
      if (!r.is_object()) continue;
      out.push_back(
          CelRule{path, r.value("rule", ""), r.value("message", ""), r.value("fieldPath", "")});
    }
  }
  if (const json* props = Properties(s)) {
    for (auto p = props->begin(); p != props->end(); ++p) {
      CollectCelRules(p.value(), ChildPath(path, p.key()), out);
    }
  }
  if (const json* items = Items(s)) CollectCelRules(*items, path + "[*]", out);
  if (const json* ap = Member(s, "additionalProperties"); ap != nullptr && ap->is_object()) {
    CollectCelRules(*ap, path + "[*]", out);
  }
}

const std::set<std::string>& ObjectMetaFields() {
  static const std::set<std::string> kFields = {"name",
                                                "generateName",
                                                "namespace",
                                                "selfLink",
                                                "uid",
                                                "resourceVersion",
                                                "generation",
                                                "creationTimestamp",
                                                "deletionTimestamp",
                                                "deletionGracePeriodSeconds",
                                                "labels",
                                                "annotations",
                                                "ownerReferences",
                                                "finalizers",
                                                "managedFields"};
  return kFields;
}

}  // namespace

std::string AggregateMessage(const std::vector<FieldError>& errors) {
  std::vector<std::string> messages;
  std::set<std::string> seen;
  for (const FieldError& e : errors) {
    if (seen.insert(e.Error()).second) messages.push_back(e.Error());
  }
  if (messages.size() == 1) return messages[0];
  return "[" + Join(messages, ", ") + "]";
}

std::optional<FieldValidation> ParseFieldValidation(const std::string& value) {
  if (value.empty() || value == "Warn") return FieldValidation::kWarn;
  if (value == "Ignore") return FieldValidation::kIgnore;
  if (value == "Strict") return FieldValidation::kStrict;
  return std::nullopt;
}

json CrdVersionSchema(const json& crd, const std::string& version) {
  const json* versions = FieldAtPath(crd, {"spec", "versions"});
  if (versions == nullptr || !versions->is_array()) return json();
  for (const json& v : *versions) {
    if (!v.is_object() || v.value("name", "") != version) continue;
    const json* schema = FieldAtPath(v, {"schema", "openAPIV3Schema"});
    return schema != nullptr && schema->is_object() ? *schema : json();
  }
  return json();
}

std::vector<FieldError> ValidateCustomResourceDefinition(const json& crd) {
  std::vector<FieldError> errors;
  const json spec = crd.value("spec", json::object());
  const json names = spec.is_object() ? spec.value("names", json::object()) : json::object();
  const std::string group = spec.is_object() ? spec.value("group", "") : "";
  const std::string plural = names.is_object() ? names.value("plural", "") : "";
  const std::string kind = names.is_object() ? names.value("kind", "") : "";
  const std::string name = crd.contains("metadata") && crd["metadata"].is_object()
                               ? crd["metadata"].value("name", "")
                               : "";
  if (!group.empty() && !plural.empty() && name != plural + "." + group) {
    errors.push_back(
        Invalid("metadata.name", GoQuote(name), "must be spec.names.plural+\".\"+spec.group"));
  }
  if (group.empty()) errors.push_back(Required("spec.group", ""));
  if (plural.empty()) errors.push_back(Required("spec.names.plural", ""));
  if (kind.empty()) errors.push_back(Required("spec.names.kind", ""));
  const json* versions = spec.is_object() ? Member(spec, "versions") : nullptr;
  if (versions == nullptr || !versions->is_array() || versions->empty()) {
    errors.push_back(Invalid("spec.versions", GoQuote("null"),
                             "must have exactly one version marked as storage version"));
    return errors;
  }
  int storage = 0;
  for (const json& v : *versions) storage += v.is_object() && v.value("storage", false) ? 1 : 0;
  if (storage != 1) {
    errors.push_back(Invalid("spec.versions", GoValue(*versions),
                             "must have exactly one version marked as storage version"));
  }
  for (size_t i = 0; i < versions->size(); ++i) {
    const json& v = (*versions)[i];
    const std::string base = "spec.versions[" + std::to_string(i) + "].schema.openAPIV3Schema";
    const json* schema = v.is_object() ? FieldAtPath(v, {"schema", "openAPIV3Schema"}) : nullptr;
    if (schema == nullptr || !schema->is_object()) {
      errors.push_back(Required(base, "schemas are required"));
      continue;
    }
    std::vector<FieldError> general;
    ValidateSchemaNode(*schema, base, general);
    if (!general.empty()) {
      errors.insert(errors.end(), general.begin(), general.end());
      continue;
    }
    std::vector<FieldError> structural;
    ValidateStructuralInvariants(*schema, Level::kRoot, base, structural);
    ValidateCompletenessEverywhere(*schema, base, structural);
    std::sort(structural.begin(), structural.end(),
              [](const FieldError& a, const FieldError& b) { return a.Error() < b.Error(); });
    errors.insert(errors.end(), structural.begin(), structural.end());
  }
  return errors;
}

std::vector<std::string> PruneUnknownFields(json& object, const json& schema) {
  std::vector<std::string> pruned;
  if (!object.is_object()) return pruned;
  // The resource root is an embedded resource: apiVersion, kind and metadata
  // stay whatever the schema says.
  Prune(object, &schema, true, "", pruned);
  std::sort(pruned.begin(), pruned.end());
  auto metadata = object.find("metadata");
  if (metadata != object.end() && metadata->is_object()) {
    std::vector<std::string> unknown;
    for (auto it = metadata->begin(); it != metadata->end(); ++it) {
      if (ObjectMetaFields().count(it.key()) == 0) unknown.push_back(it.key());
    }
    for (const std::string& k : unknown) {
      metadata->erase(k);
      pruned.push_back("metadata." + k);
    }
  }
  return pruned;
}

void PruneNullsAndDefault(json& object, const json& schema) {
  PruneNulls(object, &schema);
  Default(object, &schema);
}

std::vector<FieldError> ValidateObject(const json& object, const json& schema) {
  Validator v;
  v.Validate(object, schema, "");
  return ToFieldErrors(v.errors, "");
}

std::vector<FieldError> ValidateObjectName(const std::string& name) {
  // k8s.io/apimachinery/pkg/util/validation IsDNS1123Subdomain.
  std::vector<FieldError> errors;
  if (name.size() > 253) {
    errors.push_back(
        Invalid("metadata.name", GoQuote(name), "must be no more than 253 characters"));
  }
  static const std::regex kSubdomain(
      R"(^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)");
  if (!std::regex_search(name, kSubdomain)) {
    errors.push_back(Invalid(
        "metadata.name", GoQuote(name),
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
        "regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"));
  }
  return errors;
}

namespace {

// k8s.io/apimachinery/pkg/util/validation's name checks (IsDNS1035Label,
// IsDNS1123Label, IsValidLabelValue): at most 63 characters, and the
// pattern, each failure its own error with the validator's message.
void CheckName(const std::string& field, const std::string& value, const std::regex& pattern,
               const char* message, std::vector<FieldError>& errors) {
  if (value.size() > 63) {
    errors.push_back(Invalid(field, GoQuote(value), "must be no more than 63 characters"));
  }
  if (!std::regex_search(value, pattern)) errors.push_back(Invalid(field, GoQuote(value), message));
}
void CheckDns1035Label(const std::string& field, const std::string& value,
                       std::vector<FieldError>& errors) {
  static const std::regex kLabel(R"(^[a-z]([-a-z0-9]*[a-z0-9])?$)");
  CheckName(field, value, kLabel,
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
            "with an alphabetic character, and end with an alphanumeric character (e.g. "
            "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            errors);
}
void CheckDns1123Label(const std::string& field, const std::string& value,
                       std::vector<FieldError>& errors) {
  static const std::regex kLabel(R"(^[a-z0-9]([-a-z0-9]*[a-z0-9])?$)");
  CheckName(field, value, kLabel,
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
            "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            errors);
}
void CheckLabelValue(const std::string& field, const std::string& value,
                     std::vector<FieldError>& errors) {
  static const std::regex kValue(R"(^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$)");
  CheckName(field, value, kValue,
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  "
            "or 'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            errors);
}

}  // namespace

std::vector<FieldError> ValidateCoreObjectNames(const std::string& plural, const json& object) {
  std::vector<FieldError> errors;
  if (plural != "services" && plural != "pods") return errors;
  const json* metadata = object.contains("metadata") ? &object["metadata"] : nullptr;
  if (plural == "services" && metadata != nullptr && metadata->contains("name") &&
      (*metadata)["name"].is_string()) {
    CheckDns1035Label("metadata.name", (*metadata)["name"].get<std::string>(), errors);
  }
  if (metadata != nullptr && metadata->contains("labels") && (*metadata)["labels"].is_object()) {
    for (const auto& [key, value] : (*metadata)["labels"].items()) {
      if (value.is_string()) CheckLabelValue("metadata.labels", value.get<std::string>(), errors);
    }
  }
  if (plural == "pods" && object.contains("spec") && object["spec"].is_object()) {
    for (const char* key : {"hostname", "subdomain"}) {
      const json& spec = object["spec"];
      if (spec.contains(key) && spec[key].is_string()) {
        CheckDns1123Label(std::string("spec.") + key, spec[key].get<std::string>(), errors);
      }
    }
  }
  return errors;
}

std::vector<CelRule> ListCelRules(const json& schema) {
  std::vector<CelRule> rules;
  CollectCelRules(schema, "", rules);
  return rules;
}

}  // namespace pacer::testing
