// Cutting user- or server-supplied text to an API field's length limit.
//
// Thread-safety: pure functions.
#ifndef PACER_CONTROLLER_CORE_UTF8_PREFIX_H_
#define PACER_CONTROLLER_CORE_UTF8_PREFIX_H_

#include <cstddef>
#include <string>

namespace pacer::controller {

// At most `limit_bytes` bytes of `text`, not cutting a UTF-8 sequence in two
// (the API server refuses a string that is not UTF-8). A limit in bytes also
// holds for a limit in characters (a CRD's maxLength) of the same number.
inline std::string Utf8Prefix(const std::string& text, std::size_t limit_bytes) {
  if (text.size() <= limit_bytes) return text;
  std::size_t end = limit_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

}  // namespace pacer::controller

#endif  // PACER_CONTROLLER_CORE_UTF8_PREFIX_H_
