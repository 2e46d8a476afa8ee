"""RealFormer networks."""
from realformer_tf.networks.realformer_encoder import RealFormerEncoder
from realformer_tf.networks.realformer_decoder import RealFormerDecoder
from realformer_tf.networks.realformer_seq2seq import RealFormerSeq2SeqEncoder
