// ray_core_worker.cc: a stand-in for Ray's _raylet.so, declaring
// ray::core::CoreWorker::Get with its real signature (docs/facts.md §4), so that
// the angelspec preset's probe carries the real mangled name. Get blocks
// until enough objects were put (a producer is an inference engine), as
// ray.get on a Ray queue does. extern "C" entry points for ctypes.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace ray {

class ObjectID {
public:
	uint64_t id = 0;
};

class RayObject {
public:
	uint64_t value = 0;
};

class Status {
public:
	bool ok = true;
};

namespace core {

class CoreWorker {
public:
	__attribute__((noinline)) Status Get(const std::vector<ObjectID> &ids, const int64_t timeout_ms,
					     std::vector<std::shared_ptr<RayObject>> &results);
	void Put(uint64_t value);

private:
	std::mutex mu_;
	std::condition_variable ready_;
	std::vector<uint64_t> objects_;
};

Status CoreWorker::Get(const std::vector<ObjectID> &ids, const int64_t timeout_ms,
		       std::vector<std::shared_ptr<RayObject>> &results)
{
	std::unique_lock<std::mutex> lock(mu_);
	auto enough = [&] { return objects_.size() >= ids.size(); };
	if (timeout_ms < 0)
		ready_.wait(lock, enough);
	else if (!ready_.wait_for(lock, std::chrono::milliseconds(timeout_ms), enough))
		return Status{false};
	for (size_t i = 0; i < ids.size(); i++) {
		auto o = std::make_shared<RayObject>();
		o->value = objects_.back();
		objects_.pop_back();
		results.push_back(o);
	}
	return Status{true};
}

void CoreWorker::Put(uint64_t value)
{
	{
		std::lock_guard<std::mutex> lock(mu_);
		objects_.push_back(value);
	}
	ready_.notify_all();
}

} // namespace core
} // namespace ray

extern "C" {

void *standin_core_worker(void)
{
	return new ray::core::CoreWorker();
}

void standin_ray_put(void *w, unsigned long long value)
{
	static_cast<ray::core::CoreWorker *>(w)->Put(value);
}

// standin_ray_get takes one object, waiting for it as long as it takes.
unsigned long long standin_ray_get(void *w)
{
	std::vector<ray::ObjectID> ids(1);
	std::vector<std::shared_ptr<ray::RayObject>> results;
	static_cast<ray::core::CoreWorker *>(w)->Get(ids, -1, results);
	return results.empty() ? 0 : results[0]->value;
}
}
