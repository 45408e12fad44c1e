#pragma once
// The run's store address checked with plain sockets before c10d sees it,
// so that each way of getting it wrong has its own line and no wait is
// longer than the timeout: c10d's TCPStore reports a host that does not
// resolve as a socket timeout, hosts "its" store on any address (and then
// talks to whatever answers at 8.8.8.8), and a client's connect retried
// for two to three times --dist-timeout before giving up.

#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

namespace snn::dist::sockets {

/// One TCP address of the store's host.
struct Endpoint {
  sockaddr_storage address{};
  socklen_t length = 0;
  std::string text;  ///< numeric, e.g. "127.0.0.1" or "::1"
};

/// The TCP addresses of `host` at `port`, asking again until `deadline`
/// while the resolver has none (a launcher's DNS records may appear after
/// the process starts). Throws snn::Error naming the host and the
/// resolver's reason when the deadline passes.
std::vector<Endpoint> resolve_store_host(const std::string& host, int64_t port,
                                         std::chrono::steady_clock::time_point deadline);

/// Whether one of `endpoints` is an address of this machine (a socket can
/// bind to it). Only for explaining a failure: rank 0 can host the store
/// behind an address it does not hold (NAT, a forwarded port).
bool is_local_address(const std::vector<Endpoint>& endpoints);

/// Tries TCP connections to `endpoints` until one is accepted or `deadline`
/// passes; returns the one that answered, or nullptr. Nothing is sent: the
/// connection is closed (a socket that connected to itself does not count).
const Endpoint* wait_for_listener(const std::vector<Endpoint>& endpoints,
                                  std::chrono::steady_clock::time_point deadline);

}  // namespace snn::dist::sockets
