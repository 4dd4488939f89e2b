#include <luminal/luminal.hpp>
#include <cstdio>
int main() {
    luminal::Graph cx;
    auto a = cx.tensor({3, 1});
    auto b = cx.tensor({1, 4});
    auto c = a.matmul(b).output();
    auto rt = cx.compile(luminal::ReferenceRuntime{});
    rt.set_data(a, {1, 2, 3});
    rt.set_data(b, {1, 2, 3, 3});
    rt.execute(cx.dyn_map());
    for (float v : rt.get_f32(c)) std::printf("%g ", v);
    std::printf("\n");
}
