/* The error sources' names (mlr_budget.h), alone: the report's summary.json reader needs them and
 * nothing else of the budget (its fuzz target links this file only). */
#include "mlr_budget.h"

static const char *const NAMES[MLR_NSRC] = {"q_quant", "kv_quant", "operand", "accumulation",
                                            "exp",     "p_quant",  "merge",   "output"};

const char *mlr_source_name(int s) { return s >= 0 && s < MLR_NSRC ? NAMES[s] : "?"; }
