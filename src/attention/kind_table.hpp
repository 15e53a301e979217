#pragma once
// The CPU backend's table of head kinds: what the layer entry point (layer.cpp), the FLOP count
// (cost.cpp) and `bench-attention` (kind_bench.cpp) need of a kind, each kind's entry defined in
// its own file (softmax_family.cpp, static_head.cpp, linear_head.cpp, <kind>_head.cpp)
// and listed in kind_table.cpp. Those three files go through the table and name no kind; adding
// a kind adds its entry and one line to the list (docs/head-plans.md, "Adding a head kind").
// One virtual call per (sequence, head) task: the kind's math inside is untouched.
#include <cstdint>
#include <string>
#include <vector>

#include "attention/head_kernels.hpp"
#include "headwise/attention/attention.hpp"
#include "headwise/attention/head_plan.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"

namespace hw::attn::detail {

// "attention: head h", the start of every parameter-check error.
inline std::string head_name(int h) { return "attention: head " + std::to_string(h); }

// One head timed by bench-attention (kind_bench.cpp): its row name, its spec, and for linear
// heads the number of groups G (dimensions round-robin over them).
struct BenchCase {
  std::string name;
  HeadSpec spec;
  int groups = 3;
};

// A one-head layer's parameters for bench-attention, with the storage they point into.
struct BenchHead {
  LayerHeadParams<float> params;
  std::vector<std::vector<float>> floats;  // each kind's values and gradients (never resized after binding)
  std::vector<std::vector<int32_t>> ints;
  int64_t bytes() const {
    int64_t n = 0;
    for (const auto& v : floats) n += int64_t(v.size() * sizeof(float));
    for (const auto& v : ints) n += int64_t(v.size() * sizeof(int32_t));
    return n;
  }
};

class CpuKind {
 public:
  virtual ~CpuKind() = default;
  virtual HeadKind kind() const = 0;

  // Scratch per OpenMP thread, and parameter-gradient partials per (sequence, head), in elements
  // of F (layer.cpp sizes the workspace with the maximum over the plan's heads).
  virtual int64_t scratch(const HeadSpec& spec, int D) const = 0;
  virtual int64_t partials(const HeadSpec&, int64_t /*T*/, int /*D*/) const { return 0; }
  // False for a kind with no math at all (pruned): no output block, zero row statistics, no work.
  virtual bool computes() const { return true; }

  // Head h's parameters in p are present and valid for `spec`; throws "attention: head h ..." if not.
  virtual void check(const LayerHeadParams<float>& p, int h, const HeadSpec& spec, int D) const = 0;
  virtual void check(const LayerHeadParams<double>& p, int h, const HeadSpec& spec, int D) const = 0;
  // One (sequence, head): writes a.out and all T row statistics; returns -1 or the first position
  // whose denominator is not positive and finite (the caller throws outside the OpenMP region).
  virtual int64_t forward(const LayerHeadParams<float>& p, int h, const HeadSpec& spec,
                          const HeadFwd<float>& a) const = 0;
  virtual int64_t forward(const LayerHeadParams<double>& p, int h, const HeadSpec& spec,
                          const HeadFwd<double>& a) const = 0;
  // Accumulates into a.dq, a.dk, a.dv; `partial` is this (sequence, head)'s zeroed slice of
  // partials(spec, T, D) elements for the parameter gradients.
  virtual void backward(const LayerHeadParams<float>& p, int h, const HeadSpec& spec, const HeadBwd<float>& a,
                        float* partial) const = 0;
  virtual void backward(const LayerHeadParams<double>& p, int h, const HeadSpec& spec, const HeadBwd<double>& a,
                        double* partial) const = 0;
  // After the parallel region: adds the partials of sequences b = 0..B-1 (first + b * stride) to
  // head h's parameter gradients, in b order (deterministic). May use them as scratch.
  virtual void reduce(const LayerHeadParams<float>& p, int h, float* first, int64_t stride, int64_t B, int64_t T,
                      int D) const = 0;
  virtual void reduce(const LayerHeadParams<double>& p, int h, double* first, int64_t stride, int64_t B, int64_t T,
                      int D) const = 0;

  // Forward multiply-adds (2 FLOPs each) the kernels perform for one sequence of length T,
  // exp and normalisation excluded (attn::plan_cost; each entry says what it counts).
  virtual double flops(const HeadSpec& spec, int64_t T, double D) const = 0;
  // Keys whose scores a query row computes, for the coverage ratio (attn::plan_cost); 0 for a
  // kind that computes no scores (its cost shows in flops()).
  virtual int64_t score_keys(const HeadSpec&, int64_t /*T*/) const { return 0; }

  // bench-attention: this kind's rows of the per-kind table at length T, its rows of the
  // Fig. 3 curve, and a one-head layer's parameters for one of its cases (head 0).
  virtual std::vector<BenchCase> bench_rows(int64_t /*T*/) const { return {}; }
  virtual std::vector<BenchCase> curve_rows() const { return {}; }
  virtual void bench_params(const BenchCase&, int /*D*/, int64_t /*T*/, Rng&, BenchHead&) const {}
};

// The float and double overloads of CpuKind, written once: K (the kind's class) defines
// templates check_as, forward_as, backward_as and, if it has parameter gradients, reduce_as.
template <class K>
class CpuKindOf : public CpuKind {
 public:
  void check(const LayerHeadParams<float>& p, int h, const HeadSpec& s, int D) const override {
    self().check_as(p, h, s, D);
  }
  void check(const LayerHeadParams<double>& p, int h, const HeadSpec& s, int D) const override {
    self().check_as(p, h, s, D);
  }
  int64_t forward(const LayerHeadParams<float>& p, int h, const HeadSpec& s, const HeadFwd<float>& a) const override {
    return self().forward_as(p, h, s, a);
  }
  int64_t forward(const LayerHeadParams<double>& p, int h, const HeadSpec& s,
                  const HeadFwd<double>& a) const override {
    return self().forward_as(p, h, s, a);
  }
  void backward(const LayerHeadParams<float>& p, int h, const HeadSpec& s, const HeadBwd<float>& a,
                float* partial) const override {
    self().backward_as(p, h, s, a, partial);
  }
  void backward(const LayerHeadParams<double>& p, int h, const HeadSpec& s, const HeadBwd<double>& a,
                double* partial) const override {
    self().backward_as(p, h, s, a, partial);
  }
  void reduce(const LayerHeadParams<float>& p, int h, float* first, int64_t stride, int64_t B, int64_t T,
              int D) const override {
    self().reduce_as(p, h, first, stride, B, T, D);
  }
  void reduce(const LayerHeadParams<double>& p, int h, double* first, int64_t stride, int64_t B, int64_t T,
              int D) const override {
    self().reduce_as(p, h, first, stride, B, T, D);
  }

 protected:
  // The defaults for a kind without parameters (K's own templates hide them).
  template <class F>
  void check_as(const LayerHeadParams<F>&, int, const HeadSpec&, int) const {}
  template <class F>
  void reduce_as(const LayerHeadParams<F>&, int, F*, int64_t, int64_t, int64_t, int) const {}

 private:
  const K& self() const { return static_cast<const K&>(*this); }
};

// Every kind's entry (kind_table.cpp), in HeadKind order, and the entry of kind k (null if k has
// none: layer.cpp's input check says so).
const std::vector<const CpuKind*>& cpu_kinds();
const CpuKind* find_cpu_kind(HeadKind k);
inline const CpuKind& cpu_kind(HeadKind k) { return *find_cpu_kind(k); }

}  // namespace hw::attn::detail
