/* SHA-256 through OpenSSL's EVP interface (Debian's libssl-dev): one well-kept implementation for
 * recipe hashes, golden digests and input digests. */
#include <openssl/evp.h>
#include <stdio.h>

#include "mlr_base.h"

mlr_status mlr_sha256_hex(const void *data, size_t n, char hex[65]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (EVP_Digest(data, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) return MLR_EINVAL;
  for (unsigned i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
  return MLR_OK;
}
