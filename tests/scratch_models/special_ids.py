"""Special-token ids of the from-scratch models' vocabularies: torchtext's order (<unk> <pad> <sos> <eos>), which all
three repositories used. The models stay random: their tests steer decoding with logit biases, not training."""
UNK, PAD, SOS, EOS = 0, 1, 2, 3
