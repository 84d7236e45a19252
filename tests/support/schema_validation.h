// Structural-schema handling of CustomResourceDefinitions the way
// kube-apiserver 1.32 (apiextensions-apiserver with kube-openapi) does it, so
// that a manifest or a controller write the test API server accepts is one a
// real cluster accepts too, and a rejection reads the same:
//
// - ValidateCustomResourceDefinition: the checks on the CRD itself (every
//   served version needs a structural schema: a `type` everywhere except
//   where x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields
//   stand in, `items` for arrays, no `additionalProperties` next to
//   `properties`, value validations (allOf/anyOf/oneOf/not) without types,
//   defaults that validate).
// - PruneUnknownFields, PruneNullsAndDefault, ValidateObject: what happens to
//   a custom object on create, update and patch, in that order: fields the
//   schema does not declare are dropped (and reported, for
//   fieldValidation=Strict/Warn), nulls of non-nullable fields are dropped,
//   `default`s are filled in, then the object is validated against the
//   OpenAPI v3 value validations.
//
// Not evaluated: x-kubernetes-validations (CEL rules; ListCelRules lists
// them), x-kubernetes-list-type/map-keys uniqueness, validation ratcheting,
// and string formats other than date-time, date, byte and uuid (accepted).
// kube-apiserver itself does not check the int32/int64/float/double formats
// (it strips them before validating); integers must only be representable.
//
// Error messages are field.Error strings as kube-apiserver prints them, e.g.
// `spec.gpus: Invalid value: 0: spec.gpus in body should be greater than or
// equal to 1`; sources: k8s.io/kube-openapi pkg/validation (errors/schema.go,
// validate/*.go), k8s.io/apiextensions-apiserver pkg/apiserver/schema
// (validation.go, pruning, defaulting) and pkg/apiserver/validation, and
// k8s.io/apimachinery pkg/util/validation/field/errors.go.
//
// Thread-safety: pure functions (a compiled-pattern cache inside is guarded).
#ifndef PACER_TESTS_SUPPORT_SCHEMA_VALIDATION_H_
#define PACER_TESTS_SUPPORT_SCHEMA_VALIDATION_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pacer::testing {

// One field-level error (k8s.io/apimachinery field.Error).
struct FieldError {
  std::string type;   // the metav1 StatusCause reason: "FieldValueInvalid", "FieldValueRequired",
                      // "FieldValueNotSupported", "FieldValueTypeInvalid", "FieldValueTooLong",
                      // "FieldValueTooMany", "FieldValueForbidden"
  std::string field;  // "spec.gpus"; "<nil>" where kube-apiserver reports no field path
  std::string body;   // field.Error.ErrorBody(): "Invalid value: 0: spec.gpus in body should ..."
  std::string Error() const { return field + ": " + body; }
};

// The errors as kube-apiserver joins them after "is invalid: ": one message
// alone, several as "[a, b]" (duplicates dropped, order kept).
std::string AggregateMessage(const std::vector<FieldError>& errors);

// The fieldValidation query parameter of create, update and patch.
enum class FieldValidation { kIgnore, kWarn, kStrict };
// "" means Warn, the server's default; nullopt for anything but
// "", "Ignore", "Warn" and "Strict".
std::optional<FieldValidation> ParseFieldValidation(const std::string& value);

// The served version's openAPIV3Schema, or null when the CRD has none.
nlohmann::json CrdVersionSchema(const nlohmann::json& crd, const std::string& version);

// The errors kube-apiserver reports for a CustomResourceDefinition
// (apiextensions.k8s.io/v1); empty when it is acceptable.
std::vector<FieldError> ValidateCustomResourceDefinition(const nlohmann::json& crd);

// Drops what `schema` (a structural openAPIV3Schema) does not declare from a
// custom object, as the decoder does. apiVersion, kind and metadata stay at
// the root; unknown metadata fields go. Returns the dropped paths
// ("spec.foo", "spec.items[0].bar", "metadata.foo"), sorted.
std::vector<std::string> PruneUnknownFields(nlohmann::json& object, const nlohmann::json& schema);

// Drops nulls of fields that are neither nullable nor defaulted, then fills
// in every `default` of a missing (or non-nullable null) field.
void PruneNullsAndDefault(nlohmann::json& object, const nlohmann::json& schema);

// The OpenAPI v3 value validations of a (pruned, defaulted) object, in
// kube-openapi's order for one value and by field name across properties.
std::vector<FieldError> ValidateObject(const nlohmann::json& object, const nlohmann::json& schema);

// metadata.name of a custom object: a DNS-1123 subdomain, as kube-apiserver
// requires of custom resources.
std::vector<FieldError> ValidateObjectName(const std::string& name);

// The name rules kube-apiserver's core validation
// (k8s.io/kubernetes/pkg/apis/core/validation) applies to the built-in
// objects Pacer creates, with its messages: a Service's metadata.name is a
// DNS-1035 label; a pod's spec.hostname and spec.subdomain are DNS-1123
// labels; and every metadata.labels value of either is a label value (at
// most 63 characters). `plural` is "services" or "pods"; other kinds have
// none of these rules here.
std::vector<FieldError> ValidateCoreObjectNames(const std::string& plural,
                                                const nlohmann::json& object);

// strconv.Quote, as Go's %q renders strings in kube-apiserver's messages.
std::string GoQuote(const std::string& s);

// An x-kubernetes-validations rule (CEL). The test API server accepts these
// and never evaluates them; tests can still check that a CRD carries a rule.
struct CelRule {
  std::string path;  // where it is declared: "" for the root, "spec", "spec.resources"
  std::string rule;  // "self.minGPUs <= self.maxGPUs"
  std::string message;
  std::string field_path;  // fieldPath, when set
};
std::vector<CelRule> ListCelRules(const nlohmann::json& schema);

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_SCHEMA_VALIDATION_H_
