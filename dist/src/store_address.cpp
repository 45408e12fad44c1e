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
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&e.address), e.length) == 0) return true;
  if (errno != EINPROGRESS) return false;
  pollfd p{s.fd, POLLOUT, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) != 1) return false;
  int error = 0;
  socklen_t size = sizeof(error);
  return ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
}

}  // namespace

std::vector<Endpoint> resolve_store_host(const std::string& host, int64_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    throw Error("the store's host '" + host + "' (--master, or MASTER_ADDR) does not resolve: " +
                (rc == EAI_SYSTEM ? std::string(std::strerror(errno)) : std::string(::gai_strerror(rc))));
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

bool wait_for_listener(const std::vector<Endpoint>& endpoints, std::chrono::steady_clock::time_point deadline) {
  using namespace std::chrono;
  for (;;) {
    for (const auto& e : endpoints) {
      const auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
      if (left.count() <= 0) return false;
      if (connects(e, std::min(left, milliseconds(1000)))) return true;
    }
    if (steady_clock::now() + milliseconds(100) >= deadline) return false;
    // Not listening yet (rank 0 starts later): try again shortly.
    std::this_thread::sleep_for(milliseconds(100));
  }
}

}  // namespace snn::dist::sockets
