// Host-vector wrappers around the launchers, for correctness checks (tests and the harness's
// check step). Versions: v1 (synchronous, one allocation per buffer per call).
#include "kernels/cpu_ref/membw_ref.h"
#include "kernels/cuda_common.cuh"

namespace kvsim::kernels::cuda {

namespace {

DeviceBuffer upload_as(Precision p, const std::vector<float>& values) {
  const std::vector<uint16_t> bits = pack(p, values);
  DeviceBuffer buf(static_cast<int64_t>(bits.size() * sizeof(uint16_t)));
  buf.upload(bits.data(), buf.bytes());
  return buf;
}

std::vector<float> download_as(Precision p, const DeviceBuffer& buf, int64_t elements) {
  synchronize();
  std::vector<uint16_t> bits(static_cast<size_t>(elements));
  buf.download(bits.data(), elements * static_cast<int64_t>(sizeof(uint16_t)));
  return unpack(p, bits);
}

}  // namespace

std::vector<float> run_native_attention(int version, const AttentionShape& s, Precision p,
                                        const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v) {
  DeviceBuffer dq = upload_as(p, q), dk = upload_as(p, k), dv = upload_as(p, v);
  DeviceBuffer o(s.q_elements() * precision_bytes(p));
  DeviceBuffer ws(s.batch * s.heads * s.seq_q * s.seq_kv * precision_bytes(p));
  native_attention(version, s, p, dq.get(), dk.get(), dv.get(), o.get(), ws.get());
  return download_as(p, o, s.q_elements());
}

std::vector<float> run_flash_attention(int version, const AttentionShape& s, Precision p,
                                       const std::vector<float>& q, const std::vector<float>& k,
                                       const std::vector<float>& v) {
  DeviceBuffer dq = upload_as(p, q), dk = upload_as(p, k), dv = upload_as(p, v);
  DeviceBuffer o(s.q_elements() * precision_bytes(p));
  flash_attention(version, s, p, dq.get(), dk.get(), dv.get(), o.get());
  return download_as(p, o, s.q_elements());
}

std::vector<float> run_paged_decode(int version, const PagedDecodeShape& s, Precision p,
                                    const std::vector<float>& q, const std::vector<float>& k_cache,
                                    const std::vector<float>& v_cache,
                                    const std::vector<int32_t>& block_table) {
  DeviceBuffer dq = upload_as(p, q), dk = upload_as(p, k_cache), dv = upload_as(p, v_cache);
  DeviceBuffer table(static_cast<int64_t>(block_table.size() * sizeof(int32_t)));
  table.upload(block_table.data(), table.bytes());
  const int64_t out_elements = s.batch * s.heads * s.head_dim;
  DeviceBuffer o(out_elements * precision_bytes(p));
  paged_decode(version, s, p, dq.get(), dk.get(), dv.get(),
               static_cast<const int32_t*>(table.get()), o.get());
  return download_as(p, o, out_elements);
}

std::vector<float> run_paged_decode_varlen(int version, const PagedDecodeVarlenShape& s,
                                           Precision p, const std::vector<float>& q,
                                           const std::vector<float>& k_cache,
                                           const std::vector<float>& v_cache,
                                           const std::vector<int32_t>& block_tables,
                                           const std::vector<int32_t>& contexts) {
  DeviceBuffer dq = upload_as(p, q), dk = upload_as(p, k_cache), dv = upload_as(p, v_cache);
  DeviceBuffer tables(static_cast<int64_t>(block_tables.size() * sizeof(int32_t)));
  tables.upload(block_tables.data(), tables.bytes());
  DeviceBuffer ctx(static_cast<int64_t>(contexts.size() * sizeof(int32_t)));
  ctx.upload(contexts.data(), ctx.bytes());
  const int64_t out_elements = s.batch * s.o_stride;
  DeviceBuffer o(out_elements * precision_bytes(p));
  o.fill_zero();  // the padding between rows stays zero: the caller can check it was not written
  paged_decode_varlen(version, s, p, dq.get(), dk.get(), dv.get(),
                      static_cast<const int32_t*>(tables.get()),
                      static_cast<const int32_t*>(ctx.get()), o.get());
  return download_as(p, o, out_elements);
}

std::vector<float> run_gemm(int version, const GemmShape& s, Precision p,
                            const std::vector<float>& x, const std::vector<float>& w) {
  DeviceBuffer dx = upload_as(p, x), dw = upload_as(p, w);
  DeviceBuffer y(s.m * s.n * precision_bytes(p));
  gemm(version, s, p, dx.get(), dw.get(), y.get());
  return download_as(p, y, s.m * s.n);
}

bool run_membw_roundtrip(int version, const std::vector<uint64_t>& words) {
  const auto bytes = static_cast<int64_t>(words.size() * sizeof(uint64_t));
  DeviceBuffer src(bytes), dst(bytes), sink(sizeof(uint64_t));
  src.upload(words.data(), bytes);
  dst.fill_zero();
  sink.fill_zero();
  membw_copy(version, src.get(), dst.get(), bytes);
  membw_read(version, src.get(), bytes, static_cast<uint64_t*>(sink.get()));
  synchronize();
  std::vector<uint64_t> copied(words.size());
  dst.download(copied.data(), bytes);
  uint64_t sum = 0;
  sink.download(&sum, sizeof sum);
  return copied == words && sum == membw_read_cpu(words);
}

}  // namespace kvsim::kernels::cuda
