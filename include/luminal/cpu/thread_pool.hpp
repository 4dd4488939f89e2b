#pragma once
// The CpuRuntime's threads: started once with the runtime, woken for each
// parallel loop, no thread created per op. The calling thread takes part, so
// a pool of N threads has N - 1 workers.
//
// A loop is cut into a fixed list of contiguous parts (at most kPartsPerThread
// per thread), and threads claim parts until none is left. Which part covers
// which elements depends only on the loop, so results never depend on the
// thread count or on which thread ran what. Claiming (rather than one part per
// thread) keeps a loop going when a worker is descheduled on a busy machine:
// the others take its parts.
//
// Waking: a worker spins briefly for the next loop (a decode step runs a few
// hundred short loops back to back, and a futex wake costs more than they
// do), then sleeps (std::atomic::wait), so an idle runtime costs no CPU.
//
// The claim counter carries the loop's number and part count with the next
// part, so a worker that wakes late can only claim parts of the loop that is
// running (a compare-and-swap on the whole word).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace luminal::cpu {

class ThreadPool {
public:
    // threads: the pool's width including the caller; 0 = the machine's hardware threads.
    explicit ThreadPool(std::size_t threads = 0) {
        if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
        for (std::size_t t = 1; t < threads; ++t) workers_.emplace_back([this] { work(); });
    }
    ~ThreadPool() {
        stop_.store(true);
        wake_.fetch_add(1);
        wake_.notify_all();
        for (auto& w : workers_) w.join();
    }
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    std::size_t size() const { return workers_.size() + 1; }

    // Calls body(begin, end) on disjoint ranges covering [0, n), each at least
    // `grain` long (but the last); returns when all are done. An exception
    // from a range is rethrown here (the first one).
    template <typename Body>
    void parallel_for(std::int64_t n, std::int64_t grain, Body&& body) {
        parallel_parts(n, grain, [&](std::int64_t, std::int64_t b, std::int64_t e) { body(b, e); });
    }

    // As parallel_for, with the part's number first: body(part, begin, end),
    // part < max_parts(), for per-part scratch.
    template <typename Body>
    void parallel_parts(std::int64_t n, std::int64_t grain, Body&& body) {
        if (n <= 0) return;
        const std::int64_t parts = std::min<std::int64_t>(max_parts(), std::max<std::int64_t>(1, n / std::max<std::int64_t>(grain, 1)));
        if (parts == 1 || workers_.empty()) return body(std::int64_t{0}, std::int64_t{0}, n);
        const std::function<void(std::int64_t, std::int64_t, std::int64_t)> run = [&](std::int64_t part, std::int64_t b,
                                                                                      std::int64_t e) { body(part, b, e); };
        Loop loop{&run, n, parts};
        error_ = nullptr;
        done_.store(0, std::memory_order_relaxed);
        loop_.store(&loop, std::memory_order_release);
        const std::uint64_t number = ++loops_ & 0xFFFFFFFFu;
        claims_.store(number << 32 | static_cast<std::uint64_t>(parts) << 16, std::memory_order_release);
        wake_.fetch_add(1, std::memory_order_release);
        wake_.notify_all();
        claim_and_run();
        for (int spins = 0; done_.load(std::memory_order_acquire) != parts; ++spins)
            if (spins > kSpins) std::this_thread::yield();
            else pause();
        if (error_) std::rethrow_exception(error_);
    }

    std::int64_t max_parts() const { return static_cast<std::int64_t>(size()) * kPartsPerThread; }

private:
    static constexpr int kSpins = 4000;
    static constexpr std::int64_t kPartsPerThread = 4;

    struct Loop {
        const std::function<void(std::int64_t, std::int64_t, std::int64_t)>* body;
        std::int64_t n, parts;
    };

    static void pause() {
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#endif
    }

    // Runs parts of the running loop until none is left to claim. The loop's
    // description is read after the claim counter: a successful claim means
    // the loop was still running (parts unclaimed), so the description read
    // before it was this loop's, published before its counter.
    void claim_and_run() {
        while (true) {
            std::uint64_t claims = claims_.load(std::memory_order_acquire);
            const Loop* loop = loop_.load(std::memory_order_acquire);
            const std::uint64_t part = claims & 0xFFFF, parts = claims >> 16 & 0xFFFF;
            if (part >= parts) return;
            if (!claims_.compare_exchange_strong(claims, claims + 1, std::memory_order_acq_rel)) continue;
            const auto p = static_cast<std::int64_t>(part);
            try {
                (*loop->body)(p, loop->n * p / loop->parts, loop->n * (p + 1) / loop->parts);
            } catch (...) {
                std::lock_guard lock(error_mutex_);
                if (!error_) error_ = std::current_exception();
            }
            done_.fetch_add(1, std::memory_order_acq_rel);
        }
    }

    void work() {
        std::uint32_t seen = wake_.load();
        while (!stop_.load()) {
            std::uint32_t now = wake_.load(std::memory_order_acquire);
            for (int spins = 0; now == seen && spins < kSpins; ++spins) {
                pause();
                now = wake_.load(std::memory_order_acquire);
            }
            if (now == seen) {
                wake_.wait(seen);
                continue;
            }
            seen = now;
            claim_and_run();
        }
    }

    std::vector<std::thread> workers_;
    std::atomic<std::uint32_t> wake_{0};
    std::atomic<std::uint64_t> claims_{0};  // loop number << 32 | parts << 16 | next part
    std::atomic<const Loop*> loop_{nullptr};
    std::atomic<std::int64_t> done_{0};
    std::atomic<bool> stop_{false};
    std::uint64_t loops_ = 0;
    std::exception_ptr error_;
    std::mutex error_mutex_;
};

// The pool a runtime owns. A copy of the runtime gets threads of its own, as
// many (a pool cannot serve two runtimes running at once).
class OwnedThreadPool {
public:
    explicit OwnedThreadPool(std::size_t threads) : pool_(std::make_unique<ThreadPool>(threads)) {}
    OwnedThreadPool(const OwnedThreadPool& other) : pool_(std::make_unique<ThreadPool>(other->size())) {}
    OwnedThreadPool& operator=(const OwnedThreadPool& other) {
        if (this != &other) pool_ = std::make_unique<ThreadPool>(other->size());
        return *this;
    }
    OwnedThreadPool(OwnedThreadPool&&) noexcept = default;
    OwnedThreadPool& operator=(OwnedThreadPool&&) noexcept = default;

    ThreadPool* get() const { return pool_.get(); }
    ThreadPool* operator->() const { return pool_.get(); }
    ThreadPool& operator*() const { return *pool_; }

private:
    std::unique_ptr<ThreadPool> pool_;
};

}  // namespace luminal::cpu
