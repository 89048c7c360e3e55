// BatchMatmul of two f32 activations (src/backend/wgpu/products.rs):
// y[z, m, n] = sum_k xa[oa(z) + m K + k] xb[ob(z) + k N + n], one 16 x 16 tile
// of y per workgroup, z = wid.z the output matrix. a = (M, N, K, tiles along N),
// b = output batch dims (4), c / d = batch strides of xa / xb (0 on broadcast dims).
@group(0) @binding(0) var<storage, read> xa: array<f32>;
@group(0) @binding(1) var<storage, read> xb: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const T: u32 = 16u;
var<workgroup> ta: array<f32, 256>;
var<workgroup> tb: array<f32, 256>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let m_len = p.a.x;
    let n_len = p.a.y;
    let k_len = p.a.z;
    let tile = flat_group(wid);
    let row = (tile / p.a.w) * T + lid.y;
    let col = (tile % p.a.w) * T + lid.x;
    let z = wid.z;
    var rest = z;
    let b3 = rest % p.b.w;
    rest = rest / p.b.w;
    let b2 = rest % p.b.z;
    rest = rest / p.b.z;
    let b1 = rest % p.b.y;
    let b0 = rest / p.b.y;
    let oa = b0 * p.c.x + b1 * p.c.y + b2 * p.c.z + b3 * p.c.w;
    let ob = b0 * p.d.x + b1 * p.d.y + b2 * p.d.z + b3 * p.d.w;
    var acc = 0.0;
    for (var k0 = 0u; k0 < k_len; k0 += T) {
        let ka = k0 + lid.x;
        var va = 0.0;
        if row < m_len && ka < k_len {
            va = xa[oa + row * k_len + ka];
        }
        ta[lid.y * T + lid.x] = va;
        let kb = k0 + lid.y;
        var vb = 0.0;
        if kb < k_len && col < n_len {
            vb = xb[ob + kb * n_len + col];
        }
        tb[lid.y * T + lid.x] = vb;
        workgroupBarrier();
        for (var k = 0u; k < T; k++) {
            acc += ta[lid.y * T + k] * tb[k * T + lid.x];
        }
        workgroupBarrier();
    }
    if row < m_len && col < n_len {
        y[(z * m_len + row) * n_len + col] = acc;
    }
}
