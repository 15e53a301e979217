#include "headwise/train/stop_signals.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace hw {

namespace {

std::atomic<int> g_first_signal{0};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");

void say(const char* text) {  // async-signal-safe
  const ssize_t w = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)w;
}

void on_stop_signal(int sig) {
  int expected = 0;
  if (g_first_signal.compare_exchange_strong(expected, sig)) {
    say(sig == SIGTERM ? "headwise: SIGTERM: stopping after this update with a checkpoint (a second signal exits at once)\n"
                       : "headwise: SIGUSR1: stopping after this update with a checkpoint (a second signal exits at once)\n");
    return;
  }
  say("headwise: second stop signal: exiting now, without a checkpoint\n");
  ::_exit(128 + sig);
}

}  // namespace

void install_stop_signals() {
  if (g_installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes under way go on; the trainer looks at the flag between updates
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

bool stop_signals_installed() { return g_installed.load(); }

int stop_signal_received() { return g_first_signal.load(); }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}

}  // namespace hw
