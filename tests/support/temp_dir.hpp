#pragma once
// A scratch directory per test, removed afterwards so test runs never see each other's files.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

namespace hw::test {

// A named scratch directory for this process: `<tmp>/headwise_<name>_<pid>`, emptied on each call
// and removed when the process exits. ctest runs every test case as its own process, in
// parallel, so a name without the pid let two cases delete each other's files mid-run.
inline std::string scratch_dir(const std::string& name) {
  struct Registry {
    std::mutex mutex;
    std::vector<std::filesystem::path> paths;
    ~Registry() {
      std::error_code ec;
      for (const auto& p : paths) std::filesystem::remove_all(p, ec);
    }
  };
  static Registry registry;
  const auto d = std::filesystem::temp_directory_path() /
                 ("headwise_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  std::lock_guard<std::mutex> lock(registry.mutex);
  registry.paths.push_back(d);
  return d.string();
}

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("headwise_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace hw::test
