"""A small training script with the device hazards torchdevice-fix rewrites."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 2).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.cuda.amp.GradScaler()

for step in range(3):
    x = torch.randn(8, 4).cuda()
    target = torch.zeros(8, dtype=torch.long, device="cuda")
    with torch.cuda.amp.autocast():
        loss = nn.functional.cross_entropy(model(x), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    torch.cuda.synchronize()
    print(step, round(loss.item(), 4))

torch.save(model.state_dict(), "/tmp/model.pt")
model.load_state_dict(torch.load("/tmp/model.pt"))
