// mooncake_store.cc: a stand-in for Mooncake's store module (store.so),
// declaring mooncake::RealClient's fetch methods with their real
// signatures (kvcache-ai/Mooncake mooncake-store/include/real_client.h), so
// that the symbols gpuprof's angelspec preset probes carry the real mangled
// names. A fetch copies bytes and takes simulated transfer time. extern "C"
// entry points let the test pipeline call it through ctypes.
#include <time.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace mooncake {

struct BufferHandle {
	std::vector<char> data;
};

class RealClient {
public:
	explicit RealClient(double ns_per_byte) : ns_per_byte_(ns_per_byte) {}
	__attribute__((noinline)) int64_t get_into(const std::string &key, void *buffer, size_t size);
	__attribute__((noinline)) std::vector<int64_t> batch_get_into(const std::vector<std::string> &keys,
								      const std::vector<void *> &buffers,
								      const std::vector<size_t> &sizes);
	__attribute__((noinline)) std::shared_ptr<BufferHandle> get_buffer(const std::string &key);
	__attribute__((noinline)) std::vector<std::shared_ptr<BufferHandle>>
	batch_get_buffer(const std::vector<std::string> &keys);

private:
	void transfer(size_t bytes) const;
	double ns_per_byte_;
};

// transfer sleeps as long as moving bytes over the simulated link takes.
void RealClient::transfer(size_t bytes) const
{
	uint64_t ns = 20000 + (uint64_t)(ns_per_byte_ * (double)bytes);
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
	nanosleep(&ts, nullptr);
}

int64_t RealClient::get_into(const std::string &key, void *buffer, size_t size)
{
	memset(buffer, (int)key.size(), size);
	transfer(size);
	return (int64_t)size;
}

std::vector<int64_t> RealClient::batch_get_into(const std::vector<std::string> &keys, const std::vector<void *> &buffers,
						const std::vector<size_t> &sizes)
{
	std::vector<int64_t> out;
	size_t total = 0;
	for (size_t i = 0; i < keys.size(); i++) {
		memset(buffers[i], (int)keys[i].size(), sizes[i]);
		total += sizes[i];
		out.push_back((int64_t)sizes[i]);
	}
	transfer(total);
	return out;
}

std::shared_ptr<BufferHandle> RealClient::get_buffer(const std::string &key)
{
	auto h = std::make_shared<BufferHandle>();
	h->data.assign(1024, (char)key.size());
	transfer(h->data.size());
	return h;
}

std::vector<std::shared_ptr<BufferHandle>> RealClient::batch_get_buffer(const std::vector<std::string> &keys)
{
	std::vector<std::shared_ptr<BufferHandle>> out;
	for (const auto &k : keys)
		out.push_back(get_buffer(k));
	return out;
}

} // namespace mooncake

extern "C" {

void *standin_mooncake_client(double ns_per_byte)
{
	return new mooncake::RealClient(ns_per_byte);
}

// standin_batch_get_into fetches n samples of size bytes each into dst.
long long standin_batch_get_into(void *client, int n, size_t size, char *dst)
{
	std::vector<std::string> keys;
	std::vector<void *> buffers;
	std::vector<size_t> sizes;
	for (int i = 0; i < n; i++) {
		keys.push_back("sample-" + std::to_string(i));
		buffers.push_back(dst + (size_t)i * size);
		sizes.push_back(size);
	}
	auto got = static_cast<mooncake::RealClient *>(client)->batch_get_into(keys, buffers, sizes);
	long long total = 0;
	for (auto g : got)
		total += g;
	return total;
}
}
