#include "mlr_base.h"

#include <stdarg.h>
#include <stdio.h>

const char *mlr_status_str(mlr_status s) {
  switch (s) {
  case MLR_OK:
    return "success";
  case MLR_EINVAL:
    return "invalid argument";
  case MLR_EFORMAT:
    return "unknown number format";
  case MLR_EROUNDING:
    return "unknown or unsupported rounding mode";
  case MLR_EOVERFLOW_MODE:
    return "unknown overflow mode";
  case MLR_ENOMEM:
    return "out of memory";
  case MLR_ERANGE:
    return "size arithmetic would overflow";
  case MLR_EIO:
    return "input/output error";
  case MLR_EPARSE:
    return "malformed input";
  case MLR_ECONTRACT:
    return "input breaks the input contract";
  case MLR_EDEVICE:
    return "no usable GPU, or a GPU call failed";
  }
  return "unknown status";
}

mlr_status mlr_error_set(mlr_error *err, mlr_status st, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return st;
}
