#pragma once
// The CBLAS declarations of the configured library (CMake's HEADWISE_BLAS): MKL names its
// header mkl_cblas.h; OpenBLAS and BLIS ship cblas.h.
#if defined(HEADWISE_BLAS_MKL)
#include <mkl_cblas.h>
#else
#include <cblas.h>
#endif
