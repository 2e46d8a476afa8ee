"""RealFormer networks."""
from realformer_tf.networks.encoder import RealFormerEncoder
from realformer_tf.networks.decoder import RealFormerDecoder
from realformer_tf.networks.seq2seq import RealFormerSeq2SeqEncoder
