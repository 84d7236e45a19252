#include "tls_certs.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace pacer::testing {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

std::string BioToString(BIO* bio) {
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(size));
}

Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return InternalError(std::string("cannot build X509 extension ") + value);
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? Status::Ok() : InternalError("cannot add X509 extension");
}

StatusOr<X509Ptr> MakeCert(EVP_PKEY* key, const char* common_name, X509* issuer,
                           EVP_PKEY* issuer_key, bool is_ca, const std::string& san) {
  X509Ptr cert(X509_new());
  if (!cert) return InternalError("X509_new failed");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return InternalError("RAND_bytes failed");
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  if (is_ca) {
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE"));
    RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign"));
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash"));
  } else {
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE"));
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_key_usage,
                                 "critical,digitalSignature,keyEncipherment"));
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth"));
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_alt_name, san.c_str()));
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid"));
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return InternalError("signing the certificate failed");
  }
  return cert;
}

StatusOr<std::string> CertPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return InternalError("PEM encoding failed");
  return BioToString(bio.get());
}

}  // namespace

StatusOr<TlsMaterial> GenerateTlsMaterial(const std::string& extra_ip) {
  PkeyPtr ca_key(EVP_EC_gen("P-256"));
  PkeyPtr server_key(EVP_EC_gen("P-256"));
  if (!ca_key || !server_key) return InternalError("generating EC P-256 keys failed");
  ASSIGN_OR_RETURN(X509Ptr ca,
                   MakeCert(ca_key.get(), "pacer-test-ca", nullptr, ca_key.get(), true, ""));
  std::string san = "DNS:localhost,IP:127.0.0.1";
  if (!extra_ip.empty() && extra_ip != "127.0.0.1" && extra_ip != "0.0.0.0") {
    san += ",IP:" + extra_ip;
  }
  ASSIGN_OR_RETURN(X509Ptr server, MakeCert(server_key.get(), "pacer-test-apiserver", ca.get(),
                                            ca_key.get(), false, san));
  TlsMaterial out;
  ASSIGN_OR_RETURN(out.ca_pem, CertPem(ca.get()));
  ASSIGN_OR_RETURN(out.cert_pem, CertPem(server.get()));
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), server_key.get(), nullptr, nullptr, 0, nullptr,
                                       nullptr) != 1) {
    return InternalError("PEM encoding of the serving key failed");
  }
  out.key_pem = BioToString(bio.get());
  return out;
}

}  // namespace pacer::testing
