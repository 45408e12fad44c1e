#pragma once
// Ranks as threads of one process, each with its own store connection and
// Gloo group on 127.0.0.1, as separate processes have: for the tests of
// snn::dist and of what runs over it.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "snn/dist/world.h"

namespace snn::test {

/// World's process-wide settings, made before main and so before any rank
/// thread: prepare_process() sets the environment, which must not change
/// while other threads read it.
inline const bool kWorldProcessPrepared = (dist::World::prepare_process(), true);

/// A TCP socket bound to 127.0.0.1 on a port the kernel chose; its port in `port`.
inline int bound_socket(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

/// A port nobody listens on now.
inline int free_port() {
  int port = 0;
  ::close(bound_socket(port));
  return port;
}

/// Rank `rank` of `size` on 127.0.0.1:`port`.
inline dist::WorldOptions world_options(int64_t rank, int64_t size, int port, double timeout_s = 20) {
  dist::WorldOptions o;
  o.rank = rank;
  o.world_size = size;
  o.master_port = port;
  o.timeout_s = timeout_s;
  return o;
}

/// Runs body(world) on `size` ranks at once (or only on `ranks`); what each
/// threw ("" if nothing).
inline std::vector<std::string> run_ranks(int64_t size, const std::function<void(dist::World&)>& body,
                                          double timeout_s = 20, std::vector<int64_t> ranks = {}) {
  const int port = free_port();
  if (ranks.empty()) {
    for (int64_t r = 0; r < size; ++r) ranks.push_back(r);
  }
  std::vector<std::string> errors(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        dist::World world(world_options(ranks[i], size, port, timeout_s), [](const std::string&, int) {});
        body(world);
        world.finish();
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace snn::test
