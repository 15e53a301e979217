#pragma once
// AoH's linear algebra, in double and without external libraries (d_head <= 256): the singular
// values of one head's query-key operator M_h = W_K^g^T W_Q^h from d_head-sized factors, and the
// effective rank of a spectrum (AoH, "Autonomy-of-Heads", arXiv 2608.06849; docs/methods/aoh.md).
//
// Route: with the projections in PyTorch layout (d_head x d_model; rows are the head's output
// channels), thin QR of their transposes W^T = Q R (R: d_head x d_head, upper triangular) gives
// M = W_K^T W_Q = Q_K (R_K R_Q^T) Q_Q^T, so sigma(M) = sigma(R_K R_Q^T): a d_head x d_head SVD.
// The d_model x d_model product is never formed. (R_K^T R_K is the Gram matrix W_K W_K^T, so this
// is the Cholesky route without squaring the condition number, and it takes rank-deficient
// projections.)
#include <vector>

namespace hw::aoh {

// Eigenvalues of the symmetric n x n matrix `a` (row-major; only symmetry is assumed), by cyclic
// Jacobi rotations, in descending order.
std::vector<double> symmetric_eigenvalues(std::vector<double> a, int n);

// Singular values of the rows x cols matrix `a` (row-major), by one-sided (Hestenes) Jacobi
// rotations of its columns, in descending order (min(rows, cols) of them).
std::vector<double> singular_values(std::vector<double> a, int rows, int cols);

// R of a thin Householder QR of the rows x cols matrix `a` (row-major, rows >= cols): cols x cols,
// upper triangular, row-major (signs of its rows are arbitrary; R^T R = a^T a).
std::vector<double> qr_r_factor(std::vector<double> a, int rows, int cols);

// The d_head singular values (descending) of W_K^T W_Q, where column c of `wq_t` / `wk_t`
// (d_model x d_head, row-major: the transposed PyTorch weights, i.e. the Hugging Face Conv1D
// columns of the head) is output channel c of the projection.
// The same from the two R factors (qr_r_factor of wq_t and wk_t): a KV head's R_K serves every
// query head that reads it.
std::vector<double> qk_singular_values_from_r(const std::vector<double>& rq, const std::vector<double>& rk, int d_head);
std::vector<double> qk_singular_values(const std::vector<double>& wq_t, const std::vector<double>& wk_t, int d_model,
                                       int d_head);

// exp(-sum p_i log p_i) with p = sigma / sum(sigma) (0 log 0 = 0): between 1 (one direction) and
// the number of nonzero values (a flat spectrum). Scale-invariant. An all-zero spectrum gives 0.
double effective_rank(const std::vector<double>& sigma);

}  // namespace hw::aoh
