#pragma once
// cuBLASLt, loaded at run time like the driver: the batched GEMM behind
// cuda.BlasMatmul, f32 accumulation (CUBLAS_COMPUTE_32F, no TF32), f32 output,
// f32/bf16/f16 operands, an f32 addend laid out as the output added in the
// epilogue. The row-major product out = a . b^T is computed as
// the column-major out^T = b . a^T, so no operand is copied or transposed.
#include <cstdint>
#include <memory>

#include "luminal/core/dtype.hpp"
#include "luminal/cuda/blas_matmul_op.hpp"
#include "luminal/cuda/driver.hpp"
#include "luminal/cuda/shared_library.hpp"

namespace luminal::cuda {

// A column-major matrix as cuBLASLt's layout names it: `batch` matrices of
// rows x cols, column stride `ld`, `stride` elements apart.
struct BlasLayout {
    std::int64_t rows = 0, cols = 0, ld = 0, batch = 1, stride = 0;
};

// The call computing out[b] (m x n, row-major) = a[b] . b[b]^T as the
// column-major out^T = op(A) . op(B), with cuBLAS's A our b and its B our a^T,
// so no operand is copied or transposed. `out_stride`: elements between
// consecutive outputs.
struct BlasCall {
    bool transpose_a = false, transpose_b = false;
    BlasLayout a, b, d;
};

inline BlasCall blas_call(const BlasOperand& a, const BlasOperand& b, std::int64_t batch, std::int64_t out_stride) {
    const std::int64_t m = a.rows, n = b.rows, k = a.k;
    BlasCall call;
    call.transpose_a = b.row_major;
    call.transpose_b = !a.row_major;
    call.a = {b.row_major ? k : n, b.row_major ? n : k, b.ld, batch, b.batch_stride};
    call.b = {a.row_major ? k : m, a.row_major ? m : k, a.ld, batch, a.batch_stride};
    call.d = {n, m, n, batch, out_stride};
    return call;
}

class BlasLt {
public:
    static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

    static BlasLt& get() {
        static BlasLt blas;
        return blas;
    }

    // out[b] (m x n, row-major, f32, `out_stride` elements after out[b - 1]) = a[b] (m x k) . b[b]^T (n x k)
    // (+ addend[b], laid out as out, where `addend` is not 0), for every batch.
    void matmul(CuStream stream, DType operands, const BlasOperand& a, CuDevicePtr a_ptr, const BlasOperand& b,
                CuDevicePtr b_ptr, CuDevicePtr addend, CuDevicePtr out, std::int64_t batch, std::int64_t out_stride) {
        const std::int64_t m = a.rows, n = b.rows, k = a.k;
        const int type = data_type(operands);
        const BlasCall call = blas_call(a, b, batch, out_stride);
        Desc desc(*this);
        const int trans_a = call.transpose_a ? 1 : 0, trans_b = call.transpose_b ? 1 : 0;
        check_status(set_desc_(desc.handle, kDescTransA, &trans_a, sizeof trans_a), "cublasLtMatmulDescSetAttribute");
        check_status(set_desc_(desc.handle, kDescTransB, &trans_b, sizeof trans_b), "cublasLtMatmulDescSetAttribute");
        Layout la(*this, type, call.a);
        Layout lb(*this, type, call.b);
        Layout ld(*this, kR32F, call.d);
        Preference pref(*this);
        HeuristicResult result{};
        int found = 0;
        check_status(heuristic_(handle_, desc.handle, la.handle, lb.handle, ld.handle, ld.handle, pref.handle, 1, &result, &found),
                     "cublasLtMatmulAlgoGetHeuristic");
        check(found > 0, "cuBLASLt", "no algorithm for a {}x{}x{} product of {} (batch {})", m, n, k, name_of(operands), batch);
        const float alpha = 1, beta = addend ? 1 : 0;
        const std::size_t element = size_of(operands);
        check_status(matmul_(handle_, desc.handle, &alpha, reinterpret_cast<const void*>(b_ptr + b.base * element), la.handle,
                             reinterpret_cast<const void*>(a_ptr + a.base * element), lb.handle, &beta,
                             reinterpret_cast<const void*>(addend ? addend : out), ld.handle, reinterpret_cast<void*>(out), ld.handle, &result.algo,
                             reinterpret_cast<void*>(workspace_), kWorkspaceBytes, stream),
                     "cublasLtMatmul");
    }

private:
    using Handle = void*;
    struct Algo {
        std::uint64_t data[8];
    };
    struct HeuristicResult {  // cublasLtMatmulHeuristicResult_t
        Algo algo;
        std::size_t workspace;
        int state;
        float waves;
        int reserved[4];
    };
    static constexpr int kR32F = 0, kR16F = 2, kR16BF = 14, kCompute32F = 68;
    static constexpr int kDescTransA = 3, kDescTransB = 4;
    static constexpr int kLayoutBatchCount = 5, kLayoutBatchStride = 6, kPrefMaxWorkspace = 1;

    static int data_type(DType t) {
        switch (t) {
            case DType::F32: return kR32F;
            case DType::F16: return kR16F;
            case DType::BF16: return kR16BF;
            default: throw Error("cuBLASLt", fmt::format("no GEMM of {} operands", name_of(t)));
        }
    }

    struct Desc {
        explicit Desc(BlasLt& b) : blas(b) { blas.check_status(blas.create_desc_(&handle, kCompute32F, kR32F), "cublasLtMatmulDescCreate"); }
        ~Desc() { blas.destroy_desc_(handle); }
        BlasLt& blas;
        Handle handle = nullptr;
    };
    struct Layout {
        Layout(BlasLt& b, int type, const BlasLayout& l) : blas(b) {
            blas.check_status(blas.create_layout_(&handle, type, static_cast<std::uint64_t>(l.rows), static_cast<std::uint64_t>(l.cols), l.ld),
                              "cublasLtMatrixLayoutCreate");
            const auto count = static_cast<std::int32_t>(l.batch);
            blas.check_status(blas.set_layout_(handle, kLayoutBatchCount, &count, sizeof count), "cublasLtMatrixLayoutSetAttribute");
            blas.check_status(blas.set_layout_(handle, kLayoutBatchStride, &l.stride, sizeof l.stride), "cublasLtMatrixLayoutSetAttribute");
        }
        ~Layout() { blas.destroy_layout_(handle); }
        BlasLt& blas;
        Handle handle = nullptr;
    };
    struct Preference {
        explicit Preference(BlasLt& b) : blas(b) {
            blas.check_status(blas.create_pref_(&handle), "cublasLtMatmulPreferenceCreate");
            const std::uint64_t bytes = kWorkspaceBytes;
            blas.check_status(blas.set_pref_(handle, kPrefMaxWorkspace, &bytes, sizeof bytes), "cublasLtMatmulPreferenceSetAttribute");
        }
        ~Preference() { blas.destroy_pref_(handle); }
        BlasLt& blas;
        Handle handle = nullptr;
    };

    BlasLt() {
        Driver& driver = Driver::get();
        lib_ = SharedLibrary::open({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, "cuBLASLt");
        auto create = lib_->symbol<int (*)(Handle*)>("cublasLtCreate");
        create_desc_ = lib_->symbol<decltype(create_desc_)>("cublasLtMatmulDescCreate");
        destroy_desc_ = lib_->symbol<decltype(destroy_desc_)>("cublasLtMatmulDescDestroy");
        set_desc_ = lib_->symbol<decltype(set_desc_)>("cublasLtMatmulDescSetAttribute");
        create_layout_ = lib_->symbol<decltype(create_layout_)>("cublasLtMatrixLayoutCreate");
        destroy_layout_ = lib_->symbol<decltype(destroy_layout_)>("cublasLtMatrixLayoutDestroy");
        set_layout_ = lib_->symbol<decltype(set_layout_)>("cublasLtMatrixLayoutSetAttribute");
        create_pref_ = lib_->symbol<decltype(create_pref_)>("cublasLtMatmulPreferenceCreate");
        destroy_pref_ = lib_->symbol<decltype(destroy_pref_)>("cublasLtMatmulPreferenceDestroy");
        set_pref_ = lib_->symbol<decltype(set_pref_)>("cublasLtMatmulPreferenceSetAttribute");
        heuristic_ = lib_->symbol<decltype(heuristic_)>("cublasLtMatmulAlgoGetHeuristic");
        matmul_ = lib_->symbol<decltype(matmul_)>("cublasLtMatmul");
        check_status(create(&handle_), "cublasLtCreate");
        driver.check_call(driver.api().mem_alloc(&workspace_, kWorkspaceBytes), "cuMemAlloc (cuBLASLt workspace)");
    }

    void check_status(int status, const char* call) const { check(status == 0, "cuBLASLt", "{} failed with status {}", call, status); }

    std::unique_ptr<SharedLibrary> lib_;
    Handle handle_ = nullptr;
    CuDevicePtr workspace_ = 0;
    int (*create_desc_)(Handle*, int, int) = nullptr;
    int (*destroy_desc_)(Handle) = nullptr;
    int (*set_desc_)(Handle, int, const void*, std::size_t) = nullptr;
    int (*create_layout_)(Handle*, int, std::uint64_t, std::uint64_t, std::int64_t) = nullptr;
    int (*destroy_layout_)(Handle) = nullptr;
    int (*set_layout_)(Handle, int, const void*, std::size_t) = nullptr;
    int (*create_pref_)(Handle*) = nullptr;
    int (*destroy_pref_)(Handle) = nullptr;
    int (*set_pref_)(Handle, int, const void*, std::size_t) = nullptr;
    int (*heuristic_)(Handle, Handle, Handle, Handle, Handle, Handle, Handle, int, HeuristicResult*, int*) = nullptr;
    int (*matmul_)(Handle, Handle, const void*, const void*, Handle, const void*, Handle, const void*, const void*, Handle, void*,
                   Handle, const Algo*, void*, std::size_t, CuStream) = nullptr;
};

}  // namespace luminal::cuda
