"""PyTorch's own ResNet-18 training step beside bench/half_products_ab.sh's (bench/RESULTS.md, "bf16 training's
Casts on vectors"): torchvision's ResNet-18, 10 classes, random weights, 2 micro-batches of 8 images of 112x112 a
step, SGD with momentum, 2 threads, f32 and CPU autocast bf16 alternated twice; the median of steps 2-4's process
CPU seconds and samples/s. Usage: python3 bench/torch_resnet18_step.py"""
import torch, torchvision, time, statistics as st
torch.set_num_threads(2)
torch.manual_seed(0)
m = torchvision.models.resnet18(num_classes=10).train()
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(16, 3, 112, 112); y = torch.randint(0, 10, (16,))
def step(ac):
    t0 = time.process_time(); w0 = time.perf_counter()
    opt.zero_grad()
    for k in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=ac):
            loss = torch.nn.functional.cross_entropy(m(x[k*8:(k+1)*8]), y[k*8:(k+1)*8])
        loss.backward()
    opt.step()
    return time.process_time() - t0, 16 / (time.perf_counter() - w0)
for r in range(2):
    for ac in (False, True):
        res = [step(ac) for _ in range(4)][1:]
        print("torch", torch.__version__, "autocast" if ac else "f32", round(st.median(a for a, b in res), 3), "cpu s", round(st.median(b for a, b in res), 1), "samples/s")
