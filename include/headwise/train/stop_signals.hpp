#pragma once
// Preemption and time limits (docs/checkpoints.md, "Signals"): once install_stop_signals() ran,
// the first SIGTERM or SIGUSR1 asks the run to stop. The trainer finishes the update under way
// (and its evaluation or checkpoint), writes a checkpoint of it and returns; `train` then exits
// with kInterruptedExitStatus. A second signal ends the process at once (_exit(128 + signal)),
// without waiting for a checkpoint: one being written stays a step_N.tmp folder, which no resume
// takes. SLURM sends SIGTERM before preempting or cancelling a job and, with
// --signal=[B:]USR1@SECONDS, SIGUSR1 that long before its time limit.
namespace hw {

// The exit status of a `train` that stopped early on a signal, with a checkpoint of its last
// update: EX_TEMPFAIL of sysexits.h ("try again later"), distinct from errors (1) and from a
// death by signal (128 + n).
constexpr int kInterruptedExitStatus = 75;

// Installs the handlers (idempotent). Every rank of a job installs them, or none does: the
// trainer then agrees on the stop over the communicator (one small collective per update).
void install_stop_signals();
bool stop_signals_installed();
// 0, or the number of the first stop signal received.
int stop_signal_received();
// "SIGTERM", "SIGUSR1", ... for messages.
const char* signal_name(int sig);

}  // namespace hw
