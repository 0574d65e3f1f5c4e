/* curves.h: pprt --curves: a training run's curves as one HTML page. */
#ifndef PPRT_CURVES_H
#define PPRT_CURVES_H

#include <cjson/cJSON.h>

#include "../ir/base.h"

/* Draw the records of a pprt-train-log tree (runtime/train.c) into path,
 * whole or not at all. */
pp_status pprt_curves_write(const char *path, const cJSON *log, pp_err *err);

#endif
