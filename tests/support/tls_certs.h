// In-memory TLS material for the test API server: a self-signed CA and a
// serving certificate it signs (subjectAltName DNS:localhost, IP:127.0.0.1
// and the bind address), EC P-256 keys, valid for a day (and an hour back,
// for clock skew). Nothing touches the disk.
//
// Thread-safety: GenerateTlsMaterial() may be called from any thread.
#ifndef PACER_TESTS_SUPPORT_TLS_CERTS_H_
#define PACER_TESTS_SUPPORT_TLS_CERTS_H_

#include <string>

#include "pacer/status.h"

namespace pacer::testing {

struct TlsMaterial {
  std::string ca_pem;    // the CA certificate clients trust
  std::string cert_pem;  // the serving certificate
  std::string key_pem;   // the serving key (private; never log it)
};

// `extra_ip`: another IP address for the serving certificate's SAN (the
// bind address when it is not 127.0.0.1 or 0.0.0.0); empty for none.
StatusOr<TlsMaterial> GenerateTlsMaterial(const std::string& extra_ip);

}  // namespace pacer::testing

#endif  // PACER_TESTS_SUPPORT_TLS_CERTS_H_
