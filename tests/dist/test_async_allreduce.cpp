// Asynchronous allreduce_sum: against the blocking call and against a naive sum of every rank's
// floats (each rank regenerates the others' data from their seeds), and the request rules.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "dist/process_comm.hpp"
#include "dist/rank_floats.hpp"
#include "headwise/core/error.hpp"

using namespace hw::dist;
using test::all_comms;
using test::max_rel_diff;
using test::naive_sum;
using test::on_comm_memory;
using test::rank_floats;
using test::same_bits;

namespace {

}  // namespace

TEST_CASE("allreduce_sum_async equals allreduce_sum and the naive sum over ranks") {
  for (auto& comm : all_comms()) {
    const int w = comm->world();
    for (std::int64_t n : {0, 1, 7, 1000}) {
      INFO(comm->name() << " world=" << w << " n=" << n);
      std::vector<float> blocking = rank_floats(comm->rank(), n, 1), async = blocking;
      on_comm_memory(*comm, blocking, [&](float* p) { comm->allreduce_sum(p, n); });
      on_comm_memory(*comm, async, [&](float* p) {
        Request r = comm->allreduce_sum_async(p, n);
        CHECK(r.pending());
        comm->wait(r);
        CHECK_FALSE(r.pending());
      });
      const std::vector<float> naive = naive_sum(w, n, 1);
      if (w <= 2) {  // a + b is the same float in any order: exact
        CHECK(same_bits(async, blocking));
        CHECK(same_bits(async, naive));
      } else {  // more ranks: MPI's order of additions is its own (mpi_comm.hpp)
        CHECK(max_rel_diff(async, naive) < 1e-5);
      }
    }
  }
}

TEST_CASE("several asynchronous sums in flight, waited for in reverse order") {
  for (auto& comm : all_comms()) {
    INFO(comm->name() << " world=" << comm->world());
    const std::int64_t sizes[] = {5, 300, 64};
    std::vector<std::vector<float>> bufs;
    for (unsigned k = 0; k < 3; ++k) bufs.push_back(rank_floats(comm->rank(), sizes[k], 10 + k));
    if (comm->device_buffers()) {
      // Device copies of all three, all pending at once.
      std::vector<float*> dev(3);
      for (std::size_t k = 0; k < 3; ++k) {
        dev[k] = static_cast<float*>(hw::device::alloc(bufs[k].size() * sizeof(float), "test buffer"));
        hw::device::copy_to_device(dev[k], bufs[k].data(), bufs[k].size() * sizeof(float));
      }
      std::vector<Request> reqs;
      for (std::size_t k = 0; k < 3; ++k) reqs.push_back(comm->allreduce_sum_async(dev[k], sizes[k]));
      for (std::size_t k = 3; k-- > 0;) comm->wait(reqs[k]);
      for (std::size_t k = 0; k < 3; ++k) {
        hw::device::copy_to_host(bufs[k].data(), dev[k], bufs[k].size() * sizeof(float));
        hw::device::free(dev[k]);
      }
    } else {
      std::vector<Request> reqs;
      for (std::size_t k = 0; k < 3; ++k) reqs.push_back(comm->allreduce_sum_async(bufs[k].data(), sizes[k]));
      for (std::size_t k = 3; k-- > 0;) comm->wait(reqs[k]);
    }
    for (unsigned k = 0; k < 3; ++k) {
      const std::vector<float> naive = naive_sum(comm->world(), sizes[k], 10 + k);
      if (comm->world() <= 2)
        CHECK(same_bits(bufs[k], naive));
      else
        CHECK(max_rel_diff(bufs[k], naive) < 1e-5);
    }
  }
}

TEST_CASE("requests: waiting twice, waiting on another communicator, overwriting a pending one") {
  for (auto& comm : all_comms()) {
    INFO(comm->name());
    Request never;
    CHECK_FALSE(never.pending());
    CHECK_THROWS_WITH(comm->wait(never), Catch::Contains("not pending"));

    std::vector<float> x = rank_floats(comm->rank(), 4, 3);
    on_comm_memory(*comm, x, [&](float* p) {
      Request r = comm->allreduce_sum_async(p, 4);
      // Another communicator refuses it and leaves it pending (no collective is involved).
      LocalComm other;
      CHECK_THROWS_WITH(other.wait(r), Catch::Contains("another communicator"));
      CHECK(r.pending());
      // Moving carries the pending collective; overwriting a pending request is refused.
      Request moved(std::move(r));
      CHECK_FALSE(r.pending());
      CHECK(moved.pending());
      Request spare;
      CHECK_THROWS_WITH(moved = std::move(spare), Catch::Contains("overwritten"));
      comm->wait(moved);
      CHECK_THROWS_WITH(comm->wait(moved), Catch::Contains("not pending"));
    });
    const std::vector<float> naive = naive_sum(comm->world(), 4, 3);
    if (comm->world() <= 2) CHECK(same_bits(x, naive));
  }
}

TEST_CASE("bind_stream is a no-op for CPU communicators") {
  auto comm = test::process_comm();
  comm->bind_stream(nullptr);
  CHECK_FALSE(comm->device_buffers());
  std::vector<float> x = rank_floats(comm->rank(), 3, 4);
  Request r = comm->allreduce_sum_async(x.data(), 3);
  comm->wait(r);
  if (comm->world() <= 2) CHECK(same_bits(x, naive_sum(comm->world(), 3, 4)));
}
