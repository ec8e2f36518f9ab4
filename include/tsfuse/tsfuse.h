// tsfuse public API: the fused ops and the optimization pipeline.
#pragma once

#include "tsfuse/expr.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"
#include "registration/pipeline.h"
