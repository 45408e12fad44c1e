#include "store_address.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "snn/core/error.h"

namespace snn::dist::sockets {

namespace {

// A socket closed when it goes out of scope.
struct Socket {
  int fd = -1;
  explicit Socket(int family) : fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)) {}
  ~Socket() {
    if (fd >= 0) ::close(fd);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
};

// One non-blocking connect, waiting at most `wait` for it to complete.
bool connects(const Endpoint& e, std::chrono::milliseconds wait) {
  Socket s(e.address.ss_family);
  if (s.fd < 0) return false;
  const int flags = ::fcntl(s.fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(s.fd, F_SETFL, flags | O_NONBLOCK) < 0) return false;
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&e.address), e.length) != 0) {
    if (errno != EINPROGRESS) return false;
    pollfd p{s.fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) != 1) return false;
    int error = 0;
    socklen_t size = sizeof(error);
    if (::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0) return false;
  }
  // Linux can connect a socket to itself (its own port chosen as the
  // target's, nothing listening): that is no store.
  sockaddr_storage mine{}, peer{};
  socklen_t mine_size = sizeof(mine), peer_size = sizeof(peer);
  if (::getsockname(s.fd, reinterpret_cast<sockaddr*>(&mine), &mine_size) == 0 &&
      ::getpeername(s.fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) == 0 && mine_size == peer_size &&
      std::memcmp(&mine, &peer, mine_size) == 0) {
    return false;
  }
  return true;
}

}  // namespace

std::vector<Endpoint> resolve_store_host(const std::string& host, int64_t port,
                                         std::chrono::steady_clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  for (;;) {
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    if (rc == 0) break;
    const std::string reason = rc == EAI_SYSTEM ? std::string(std::strerror(errno)) : std::string(::gai_strerror(rc));
    const bool may_appear = rc == EAI_AGAIN || rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_FAIL;
    if (!may_appear || std::chrono::steady_clock::now() + std::chrono::milliseconds(500) >= deadline) {
      throw Error("the store's host '" + host + "' (--master, or MASTER_ADDR) does not resolve: " + reason);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::vector<Endpoint> out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_addrlen > sizeof(sockaddr_storage)) continue;
    Endpoint e;
    std::memcpy(&e.address, a->ai_addr, a->ai_addrlen);
    e.length = a->ai_addrlen;
    char text[NI_MAXHOST] = {};
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof(text), nullptr, 0, NI_NUMERICHOST) == 0) e.text = text;
    out.push_back(e);
  }
  ::freeaddrinfo(found);
  if (out.empty()) throw Error("the store's host '" + host + "' (--master, or MASTER_ADDR) has no TCP address");
  return out;
}

bool is_local_address(const std::vector<Endpoint>& endpoints) {
  for (const auto& e : endpoints) {
    Socket s(e.address.ss_family);
    if (s.fd < 0) continue;
    sockaddr_storage any_port = e.address;  // port 0: the check takes no port
    if (any_port.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&any_port)->sin_port = 0;
    if (any_port.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&any_port)->sin6_port = 0;
    if (::bind(s.fd, reinterpret_cast<const sockaddr*>(&any_port), e.length) == 0) return true;
  }
  return false;
}

const Endpoint* wait_for_listener(const std::vector<Endpoint>& endpoints,
                                  std::chrono::steady_clock::time_point deadline) {
  using namespace std::chrono;
  for (;;) {
    for (const auto& e : endpoints) {
      const auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
      if (left.count() <= 0) return nullptr;
      if (connects(e, std::min(left, milliseconds(1000)))) return &e;
    }
    if (steady_clock::now() + milliseconds(100) >= deadline) return nullptr;
    // Not listening yet (rank 0 starts later): try again shortly.
    std::this_thread::sleep_for(milliseconds(100));
  }
}

}  // namespace snn::dist::sockets
