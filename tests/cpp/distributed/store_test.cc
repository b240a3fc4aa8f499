#include "distributed/store.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kiln/error.h"

namespace kiln::distributed {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Long enough never to fire on a loaded machine in the tests that expect no timeout.
constexpr milliseconds kLong(10000);
// The timeout of the tests that expect one.
constexpr milliseconds kShort(200);

std::vector<char> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<char>& v) { return {v.begin(), v.end()}; }

// The kiln::Error `fn` throws (fails the test when it throws none).
Error error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return Error(ErrorKind::kGeneric, "");
}

void expect_distributed_error(const std::function<void()>& fn, const std::string& needle) {
  const Error e = error_of(fn);
  EXPECT_EQ(e.kind(), ErrorKind::kDistributed) << e.what();
  EXPECT_NE(e.message().find(needle), std::string::npos)
      << "expected an error containing '" << needle << "', got: " << e.what();
}

// A fresh directory, removed with everything in it at the end of the scope.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kiln_store_XXXXXX").string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Opens handles on one store of the parameter's kind: open() returns another handle on the same
// table (a client of the same server, a store on the same directory, the same memory store).
class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") memory_ = make_memory_store(kLong);
    if (GetParam() == "tcp") server_ = make_tcp_store("127.0.0.1", 0, /*serve=*/true, kLong);
    if (GetParam() == "prefix") prefix_base_ = make_memory_store(kLong);
  }

  // A handle whose blocking calls wait `timeout`. A memory store's timeout is fixed at creation,
  // so for another timeout it is a new, empty store.
  std::shared_ptr<Store> open(milliseconds timeout = kLong) {
    const std::string& kind = GetParam();
    if (kind == "memory") return timeout == kLong ? memory_ : make_memory_store(timeout);
    if (kind == "file") return make_file_store(dir_.path() + "/store", timeout);
    if (kind == "tcp") return make_tcp_store("127.0.0.1", bound_port(*server_), false, timeout);
    return make_prefix_store("group", timeout == kLong ? prefix_base_ : make_memory_store(timeout));
  }

  TempDir dir_;
  std::shared_ptr<Store> memory_;
  std::unique_ptr<Store> server_;
  std::shared_ptr<Store> prefix_base_;
};

TEST_P(StoreTest, GetReturnsWhatSetStored_ForAnyBytes) {
  std::shared_ptr<Store> s = open();
  const std::string odd_key("a/b c\n\0..", 9);
  const std::vector<char> odd_value = {'\0', '\xff', 'x', '\n'};
  s->set(odd_key, odd_value);
  s->set("empty", {});
  s->set("twice", bytes("first"));
  s->set("twice", bytes("second"));
  EXPECT_EQ(s->get(odd_key), odd_value);
  EXPECT_EQ(open()->get(odd_key), odd_value);
  EXPECT_TRUE(s->get("empty").empty());
  EXPECT_EQ(text(s->get("twice")), "second");
}

TEST_P(StoreTest, GetWaits_UntilAnotherThreadSetsTheKey) {
  std::shared_ptr<Store> s = open();
  std::thread writer([other = open()] {
    std::this_thread::sleep_for(milliseconds(50));
    other->set("late", bytes("here"));
  });
  EXPECT_EQ(text(s->get("late")), "here");
  writer.join();
}

TEST_P(StoreTest, AddIsAtomic_Across4ThreadsOf100Adds) {
  std::vector<std::vector<int64_t>> seen(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&seen, t, s = open()] {
      for (int i = 0; i < 100; ++i) seen[t].push_back(s->add("counter", 1));
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<int64_t> all;
  for (const auto& v : seen) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> want(400);
  for (int i = 0; i < 400; ++i) want[i] = i + 1;
  EXPECT_EQ(all, want);  // every sum returned once: no lost or doubled update
  EXPECT_EQ(text(open()->get("counter")), "400");
  EXPECT_EQ(open()->add("counter", -401), -1);
}

TEST_P(StoreTest, AddThrows_WhenTheKeyHoldsNoInteger) {
  std::shared_ptr<Store> s = open();
  s->set("name", bytes("alice"));
  expect_distributed_error([&] { s->add("name", 1); }, "expected the key to hold an integer");
  EXPECT_EQ(text(s->get("name")), "alice");
  s->set("big", bytes("9223372036854775807"));
  expect_distributed_error([&] { s->add("big", 1); }, "overflows");
}

TEST_P(StoreTest, CheckIsTrue_OnlyWhenEveryKeyExists) {
  std::shared_ptr<Store> s = open();
  EXPECT_TRUE(s->check({}));
  EXPECT_FALSE(s->check({"a"}));
  s->set("a", bytes("1"));
  EXPECT_TRUE(s->check({"a"}));
  EXPECT_FALSE(s->check({"a", "b"}));
  s->add("b", 0);
  EXPECT_TRUE(s->check({"a", "b"}));
  s->wait({"a", "b"});  // returns at once
}

TEST_P(StoreTest, WaitAndGetThrow_AfterTheTimeout_NamingTheMissingKey) {
  std::shared_ptr<Store> s = open(kShort);
  EXPECT_EQ(s->timeout(), kShort);
  s->set("present", bytes("1"));
  const Clock::time_point start = Clock::now();
  const Error e = error_of([&] { s->wait({"present", "missing"}); });
  const auto took = Clock::now() - start;
  EXPECT_EQ(e.kind(), ErrorKind::kDistributed);
  EXPECT_NE(e.message().find("timed out after 0.2 s waiting for key "), std::string::npos)
      << e.what();
  EXPECT_NE(e.message().find("missing'"), std::string::npos) << e.what();
  EXPECT_EQ(e.message().find("present"), std::string::npos) << e.what();
  EXPECT_GE(took, milliseconds(150));
  EXPECT_LT(took, std::chrono::seconds(5));
  expect_distributed_error([&] { s->get("absent"); }, "absent'");
}

TEST_P(StoreTest, PrefixStoresOfOneBase_KeepTheirKeysApart) {
  std::shared_ptr<Store> base = open();
  std::unique_ptr<Store> a = make_prefix_store("a", base);
  std::unique_ptr<Store> b = make_prefix_store("b", base);
  a->set("k", bytes("from a"));
  EXPECT_FALSE(b->check({"k"}));
  EXPECT_TRUE(a->check({"k"}));
  EXPECT_TRUE(base->check({"a/k"}));
  b->set("k", bytes("from b"));
  EXPECT_EQ(text(a->get("k")), "from a");
  EXPECT_EQ(text(b->get("k")), "from b");
  EXPECT_EQ(a->add("n", 2), 2);
  EXPECT_EQ(b->add("n", 5), 5);
  EXPECT_EQ(a->timeout(), base->timeout());
}

INSTANTIATE_TEST_SUITE_P(AllKinds, StoreTest, ::testing::Values("memory", "file", "tcp", "prefix"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(TcpStore, SeveralClientThreads_MeetThroughOneServer) {
  std::unique_ptr<Store> server = make_tcp_store("127.0.0.1", 0, /*serve=*/true, kLong);
  const int port = bound_port(*server);
  EXPECT_GT(port, 0);
  constexpr int kRanks = 4;
  std::vector<std::string> seen(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      std::unique_ptr<Store> s = make_tcp_store("localhost", port, /*serve=*/false, kLong);
      s->set("rank/" + std::to_string(r), bytes("addr" + std::to_string(r)));
      s->add("joined", 1);
      s->wait({"rank/0", "rank/1", "rank/2", "rank/3"});
      for (int peer = 0; peer < kRanks; ++peer)
        seen[r] += text(s->get("rank/" + std::to_string(peer)));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const std::string& s : seen) EXPECT_EQ(s, "addr0addr1addr2addr3");
  EXPECT_EQ(text(server->get("joined")), "4");
}

TEST(TcpStore, BoundPort_IsTheListeningPortOfAServerOnly) {
  std::unique_ptr<Store> server = make_tcp_store("127.0.0.1", 0, /*serve=*/true, kLong);
  const int port = bound_port(*server);
  EXPECT_GT(port, 0);
  EXPECT_EQ(bound_port(*make_tcp_store("127.0.0.1", port, /*serve=*/false, kLong)), -1);
  EXPECT_EQ(bound_port(*make_memory_store(kLong)), -1);
  expect_distributed_error([&] { make_tcp_store("127.0.0.1", port, /*serve=*/true, kLong); },
                           "cannot listen on port " + std::to_string(port));
}

TEST(TcpStore, ClientFailsWithinItsTimeout_WhenNoServerListens) {
  // A bound socket that never listens holds a port that refuses connections.
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(addr);
  ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&addr), size), 0);
  ::getsockname(holder, reinterpret_cast<sockaddr*>(&addr), &size);
  const std::string where = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  const Clock::time_point start = Clock::now();
  const Error e =
      error_of([&] { make_tcp_store("127.0.0.1", ntohs(addr.sin_port), /*serve=*/false, kShort); });
  const auto took = Clock::now() - start;
  ::close(holder);
  EXPECT_EQ(e.kind(), ErrorKind::kDistributed);
  EXPECT_NE(
      e.message().find("could not connect to the rendezvous server at " + where + " within 0.2 s"),
      std::string::npos)
      << e.what();
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(TcpStore, ClientThrowsAtOnce_WhenItsServerIsDestroyed) {
  std::unique_ptr<Store> server = make_tcp_store("127.0.0.1", 0, /*serve=*/true, kLong);
  const int port = bound_port(*server);
  std::unique_ptr<Store> client = make_tcp_store("127.0.0.1", port, /*serve=*/false, kLong);
  client->set("k", bytes("v"));
  server.reset();
  const Clock::time_point start = Clock::now();
  const std::string where = "127.0.0.1:" + std::to_string(port);
  expect_distributed_error([&] { client->get("k"); },
                           "lost connection to the rendezvous server at " + where);
  expect_distributed_error([&] { client->set("k", bytes("v")); }, "lost connection");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
}

TEST(TcpStore, BadHostName_IsAClearError) {
  // Characters no host name may hold: the resolver rejects the name without asking DNS.
  expect_distributed_error([] { make_tcp_store("not a host!", 29500, /*serve=*/false, kShort); },
                           "cannot resolve the host 'not a host!'");
  expect_distributed_error([] { make_tcp_store("not a host!", 0, /*serve=*/true, kShort); },
                           "cannot resolve the host 'not a host!'");
}

TEST(TcpStore, PortOutOfRange_IsAValueError) {
  const Error e = error_of([] { make_tcp_store("127.0.0.1", 0, /*serve=*/false, kShort); });
  EXPECT_EQ(e.kind(), ErrorKind::kValue);
  EXPECT_NE(e.message().find("expected a port in [1, 65535], got 0"), std::string::npos);
}

TEST(FileStore, KeysOver100Bytes_AreRejected) {
  TempDir dir;
  std::unique_ptr<Store> s = make_file_store(dir.path(), kShort);
  s->set(std::string(100, 'k'), bytes("ok"));
  expect_distributed_error([&] { s->set(std::string(101, 'k'), bytes("no")); },
                           "expected a key of at most 100 bytes, got 101 bytes");
}

}  // namespace
}  // namespace kiln::distributed
